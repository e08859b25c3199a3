"""What each feature costs, measured one at a time on the same data, and the candidate layouts
measured beside the product's.

A feature's cost is measured by turning it off for one measurement and comparing with the same
measurement with everything on, alternating so that drift on a shared machine falls on both:
signing and root sources by stubbing their one call in append_records (in this process only),
row-level security by a pool that stays the superuser (which bypasses it),
and auth by a server with LINEAGE_AUTH=keys and a real key against one with none.
"""

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import asyncpg

from bench.figures import Figure, Report, percentile
from lineage import db
from lineage.db.database import Database
from lineage.services import appends
from lineage.settings import Settings

if TYPE_CHECKING:
    from bench.run import Plan

# Each stubbed feature: the name append_records calls it by in lineage.services.appends.
STUBBED_CALLS = {
    "signing (HMAC per record + signature rows)": ("signing", "append_signatures"),
    "root sources (side table for blast radius by source)": (None, "note_root_sources"),
}


def describe() -> str:
    on = ["row-level security (app role lineage_app)", "root sources"]
    if hasattr(appends, "signing"):
        on.append("record signing")
    with contextlib.suppress(ImportError):
        from lineage.verifiable_log import storage  # noqa: F401

        on.append(
            "verifiable log queue (written by the append statement; sequencer off during "
            "timings: LINEAGE_LOG_INTERVAL_S=0)"
        )
    return ", ".join(on) + "; HTTP figures with LINEAGE_AUTH=none (auth measured separately below)"


@contextlib.contextmanager
def stubbed(module_name: str | None, attribute: str) -> Iterator[bool]:
    """Replace one awaited call of append_records with a no-op; False when it is not there."""
    owner: Any = appends if module_name is None else getattr(appends, module_name, None)
    original = getattr(owner, attribute, None) if owner is not None else None
    if original is None:
        yield False
        return

    async def nothing(*args: object, **kwargs: object) -> None:
        return None

    setattr(owner, attribute, nothing)
    try:
        yield True
    finally:
        setattr(owner, attribute, original)


async def superuser_pool(url: str) -> asyncpg.Pool:
    """A pool that stays the connecting superuser: row-level security does not apply."""
    return await db.create_pool(url, max_size=4, as_owner=True)


async def costs(report: Report, pool: asyncpg.Pool, plan: "Plan", url: str, tenant: str) -> None:
    from bench.run import append_rate, ingest_rows, proposals

    group = "feature cost (batch append)"
    counter = iter(range(1_000_000))

    def fresh() -> list[Any]:
        namespace = f"cost{int(time.time())}x{next(counter)}"
        return proposals(ingest_rows(plan.ingest_records, namespace, tenant))

    async def everything_on() -> float:
        return await append_rate(pool, fresh())

    async def compare(name: str, without: Callable[[], Any]) -> None:
        before = await everything_on()
        off = await without()
        after = await everything_on()
        if off is None:
            report.add(Figure(group, name, "%", float("nan"), note="not in this build"))
            return
        with_it = (before + after) / 2
        report.add(
            Figure(
                group,
                name,
                "% of append time",
                (off / with_it - 1) * 100,
                note=f"{with_it:,.0f} records/s with it, {off:,.0f} without",
            )
        )

    for name, (module_name, attribute) in STUBBED_CALLS.items():

        async def without_call(
            module_name: str | None = module_name, attribute: str = attribute
        ) -> float | None:
            with stubbed(module_name, attribute) as present:
                return await append_rate(pool, fresh()) if present else None

        await compare(name, without_call)

    unrestricted = await superuser_pool(url)
    try:

        async def without_rls() -> float:
            return await append_rate(unrestricted, fresh())

        await compare("row-level security (app role vs superuser)", without_rls)
        await _rls_on_walks(report, pool, unrestricted, tenant)
    finally:
        await unrestricted.close()
    await _auth(report, plan, url, tenant)


async def _rls_on_walks(
    report: Report, pool: asyncpg.Pool, unrestricted: asyncpg.Pool, tenant: str
) -> None:
    async with db.transaction(pool, tenant) as connection:
        answers = [
            r["context_id"]
            for r in await connection.fetch(
                "SELECT context_id FROM provenance WHERE tenant_id = $1 AND kind = 'answer' "
                "LIMIT 300",
                tenant,
            )
        ]
    # An untimed pass first, then each side twice in turn: the side timed first paid the cold
    # reads of both (the 1M run of 2026-12-03 read 139% for a cost of about 10% warm).
    samples: dict[asyncpg.Pool, list[float]] = {pool: [], unrestricted: []}
    for chosen in (pool, pool, unrestricted, pool, unrestricted):
        async with db.transaction(chosen, tenant, statement_timeout_ms=60_000) as connection:
            timed = []
            for answer in answers:
                started = time.perf_counter()
                await db.fetch(
                    connection, "walk_back", tenant_id=tenant, context_id=answer, max_depth=20
                )
                timed.append((time.perf_counter() - started) * 1000)
        samples[chosen] += timed
    samples[pool] = samples[pool][len(answers) :]  # the untimed pass
    medians = [percentile(samples[chosen], 0.5) for chosen in (pool, unrestricted)]
    report.add(
        Figure(
            "feature cost (walk-back)",
            "row-level security (app role vs superuser)",
            "% of walk time",
            (medians[0] / medians[1] - 1) * 100,
            samples=len(answers),
            note=f"p50 {medians[0]:.3f} ms with it, {medians[1]:.3f} ms without",
        )
    )


async def _auth(report: Report, plan: "Plan", url: str, tenant: str) -> None:
    from bench.load import run_load
    from bench.run import HTTP_ENV
    from bench.server import serving

    try:
        from lineage.services import auth
    except ImportError:
        report.add(
            Figure("feature cost (HTTP)", "auth", "%", float("nan"), note="not in this build")
        )
        return
    # Keys are made for a vouched tenant only: a pool that holds the vouching key.
    owner = await db.create_pool(url, max_size=1, as_owner=True)
    try:
        token, _ = await auth.create_key(Database(owner, Settings()), tenant, "admin", "bench")
    finally:
        await owner.close()
    rates = {}
    for name, env, key in (
        ("none", HTTP_ENV, None),
        ("keys", HTTP_ENV | {"LINEAGE_AUTH": "keys"}, token),
    ):
        with serving(url, env, key) as server:
            rates[name] = await run_load(server, url, tenant, rate=None, seconds=plan.http_seconds)
    report.add(
        Figure(
            "feature cost (HTTP)",
            "auth (bearer key check) on single-record appends",
            "% of request time",
            (rates["none"].throughput / rates["keys"].throughput - 1) * 100,
            note=f"{rates['keys'].throughput:,.0f}/s with keys, {rates['none'].throughput:,.0f}/s "
            f"without; p50 {rates['keys'].percentile(0.5):.1f} ms with keys, "
            f"{rates['none'].percentile(0.5):.1f} ms without",
        )
    )


async def array_candidate(
    report: Report, pool: asyncpg.Pool, url: str, source_uri: str, tenant: str
) -> None:
    """The layout root_sources did not take, measured on the same data: each record's root
    sources as one array under a GIN index. Array containment is not leakproof, so under
    row-level security PostgreSQL cannot use the index and scans the table instead."""
    group = "every answer of the hottest document"
    owner = await asyncpg.connect(url)
    try:
        await owner.execute("DROP TABLE IF EXISTS bench_root_source_sets")
        started = time.perf_counter()
        await owner.execute(
            "CREATE TABLE bench_root_source_sets AS "
            "SELECT tenant_id, context_id, kind, array_agg(source_uri) AS source_uris "
            "FROM root_sources GROUP BY tenant_id, context_id, kind"
        )
        await owner.execute(
            "CREATE INDEX ON bench_root_source_sets USING gin (source_uris) WITH (fastupdate = off)"
        )
        await owner.execute(
            "ALTER TABLE bench_root_source_sets ENABLE ROW LEVEL SECURITY; "
            "ALTER TABLE bench_root_source_sets FORCE ROW LEVEL SECURITY; "
            "CREATE POLICY bench_tenant ON bench_root_source_sets "
            "USING (tenant_id = current_setting('lineage.tenant_id', true)); "
            "GRANT SELECT ON bench_root_source_sets TO lineage_app"
        )
        await owner.execute("VACUUM (ANALYZE) bench_root_source_sets")
        build = time.perf_counter() - started
        size = await owner.fetchval(
            "SELECT pg_size_pretty(pg_total_relation_size('bench_root_source_sets'))"
        )
        query = (
            "SELECT context_id FROM bench_root_source_sets "
            "WHERE tenant_id = $1 AND source_uris @> ARRAY[$2] AND kind = 'answer'"
        )
        unrestricted = await superuser_pool(url)
        try:
            for who, chosen in (("superuser", unrestricted), ("app role, RLS on", pool)):
                async with db.transaction(chosen, tenant, statement_timeout_ms=120_000) as c:
                    samples = []
                    for _ in range(3):
                        started = time.perf_counter()
                        rows = await c.fetch(query, tenant, source_uri)
                        samples.append((time.perf_counter() - started) * 1000)
                report.add(
                    Figure.timed(
                        group,
                        f"candidate: root sources as a GIN-indexed array, ids, {who}",
                        samples,
                        note=f"{len(rows):,} answers; built in {build:.1f} s, {size}; bench only",
                    )
                )
        finally:
            await unrestricted.close()
    finally:
        await owner.execute("DROP TABLE IF EXISTS bench_root_source_sets")
        await owner.close()


async def postings_candidate(
    report: Report, pool: asyncpg.Pool, url: str, source_uri: str, tenant: str
) -> None:
    """A layout that would hold a source's descendants in a fraction of root_sources' size,
    measured on the same data: each source's ids per kind in buckets of 1,000, in the order
    the API lists them (depth, id), so a radius reads its buckets with no sort; beside it what
    appends would still need, each record's root sources as numbers (the sources interned)."""
    group = "every answer of the hottest document"
    owner = await asyncpg.connect(url)
    try:
        await owner.execute("DROP TABLE IF EXISTS bench_root_postings, bench_record_roots")
        started = time.perf_counter()
        await owner.execute(
            "CREATE TABLE bench_root_postings AS "
            "SELECT tenant_id, source_uri, kind, n / 1000 AS bucket, "
            "       array_agg(context_id ORDER BY n) AS ids, array_agg(depth ORDER BY n) AS depths "
            "FROM (SELECT tenant_id, source_uri, kind, context_id, depth, row_number() OVER "
            "      (PARTITION BY tenant_id, source_uri, kind ORDER BY depth, context_id) - 1 AS n"
            "      FROM root_sources) AS numbered "
            "GROUP BY tenant_id, source_uri, kind, n / 1000"
        )
        await owner.execute(
            "CREATE UNIQUE INDEX ON bench_root_postings (tenant_id, source_uri, kind, bucket); "
            "ALTER TABLE bench_root_postings ENABLE ROW LEVEL SECURITY; "
            "ALTER TABLE bench_root_postings FORCE ROW LEVEL SECURITY; "
            "CREATE POLICY bench_tenant ON bench_root_postings "
            "USING (tenant_id = (SELECT lineage_session_tenant())); "
            "GRANT SELECT ON bench_root_postings TO lineage_app"
        )
        build = time.perf_counter() - started
        await owner.execute(
            "CREATE TABLE bench_record_roots AS "
            "SELECT r.tenant_id, r.context_id, array_agg(s.number) AS sources "
            "FROM root_sources AS r JOIN ("
            "    SELECT source_uri, row_number() OVER (ORDER BY source_uri)::int AS number "
            "    FROM (SELECT DISTINCT source_uri FROM root_sources) AS distinct_sources"
            ") AS s USING (source_uri) GROUP BY r.tenant_id, r.context_id; "
            "CREATE UNIQUE INDEX ON bench_record_roots (tenant_id, context_id)"
        )
        await owner.execute("VACUUM (ANALYZE) bench_root_postings, bench_record_roots")
        sizes = {
            table: await table_bytes(owner, table)
            for table in ("provenance", "root_sources", "bench_root_postings", "bench_record_roots")
        }
        query = (
            "SELECT u.context_id, u.depth FROM bench_root_postings AS p "
            "CROSS JOIN LATERAL unnest(p.ids, p.depths) AS u (context_id, depth) "
            "WHERE p.tenant_id = $1 AND p.source_uri = $2 AND p.kind = 'answer' "
            "ORDER BY p.bucket"
        )
        async with db.transaction(pool, tenant, statement_timeout_ms=120_000) as connection:
            samples = []
            for _ in range(4):
                started = time.perf_counter()
                rows = 0
                async for _row in connection.cursor(query, tenant, source_uri, prefetch=1000):
                    rows += 1
                samples.append((time.perf_counter() - started) * 1000)
        provenance = sizes["provenance"]
        candidate = sizes["bench_root_postings"] + sizes["bench_record_roots"]
        report.add(
            Figure.timed(
                group,
                "candidate: root sources as id buckets per source and kind, app role, RLS on",
                samples[1:],
                note=f"{rows:,} answers to the last row; postings "
                f"{_mb(sizes['bench_root_postings'])} + each record's sources "
                f"{_mb(sizes['bench_record_roots'])} = "
                f"{candidate / provenance:.2f}x provenance ({_mb(provenance)}), against "
                f"root_sources' {sizes['root_sources'] / provenance:.2f}x; postings built in "
                f"{build:.0f} s; bench only",
            )
        )
    finally:
        await owner.execute("DROP TABLE IF EXISTS bench_root_postings, bench_record_roots")
        await owner.close()


async def table_bytes(connection: asyncpg.Connection, table: str) -> int:
    """A table's bytes with its indexes; a partitioned table's own size is 0, so its
    partitions' added up."""
    size: int = await connection.fetchval(
        "SELECT coalesce(sum(pg_total_relation_size(relid)), "
        "                pg_total_relation_size($1::regclass))::bigint "
        "FROM pg_partition_tree($1::regclass) WHERE isleaf",
        table,
    )
    return size


def _mb(size: int) -> str:
    return f"{size / 2**20:,.0f} MB"
