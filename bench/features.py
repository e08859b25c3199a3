"""What each feature costs, measured one at a time on the same data, and what the root sources
take as stored.

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
    "root sources (postings for blast radius by source)": (None, "note_root_sources"),
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


# Root sources as stored (migration 0036): the postings under 'source:' and the source_uri,
# rows of up to 1,000 ids, and each record's own arrays, which a child's append carries down.
DOCUMENT_POSTINGS = """
SELECT count(*) AS rows, coalesce(sum(ids), 0) AS ids,
       coalesce(sum(ids) FILTER (WHERE kind = 'answer'), 0) AS answers
FROM (SELECT kind,
             coalesce(cardinality(context_uuids), 0) + coalesce(cardinality(context_ids), 0) AS ids
      FROM invalidation_postings
      WHERE tenant_id = $1
        AND key_no = (SELECT key_no FROM invalidation_keys
                      WHERE tenant_id = $1 AND key = 'source:' || $2)) AS rows
"""
POSTINGS_BYTES = """
SELECT coalesce(sum(pg_column_size(ip.*)) FILTER (WHERE k.key LIKE 'source:%'), 0) AS sources,
       coalesce(sum(pg_column_size(ip.*)), 0) AS all_keys
FROM invalidation_postings AS ip
JOIN invalidation_keys AS k ON k.tenant_id = ip.tenant_id AND k.key_no = ip.key_no
"""
RECORD_ARRAYS_BYTES = """
SELECT coalesce(sum(pg_column_size(root_sources) + pg_column_size(root_depths)), 0)
FROM provenance
"""


async def stored_root_sources(report: Report, url: str, source_uri: str, tenant: str) -> None:
    """What the root sources take as stored, beside provenance: their postings (their share of
    invalidation_postings' rows, of its bytes with indexes) and each record's arrays (inside
    provenance's own bytes); with the rows the hottest document's blast radius reads."""
    owner = await asyncpg.connect(url)
    try:
        document = await owner.fetchrow(DOCUMENT_POSTINGS, tenant, source_uri)
        shares = await owner.fetchrow(POSTINGS_BYTES)
        arrays: int = await owner.fetchval(RECORD_ARRAYS_BYTES)
        provenance = await table_bytes(owner, "provenance")
        postings_table = await table_bytes(owner, "invalidation_postings")
    finally:
        await owner.close()
    share = shares["sources"] / shares["all_keys"] if shares["all_keys"] else 0.0
    postings = postings_table * share
    report.add(
        Figure(
            "every answer of the hottest document",
            "root sources as stored: postings under 'source:' and each record's arrays",
            "x provenance",
            (postings + arrays) / provenance,
            note=f"this document: {document['rows']:,} postings rows of {document['ids']:,} ids "
            f"({document['answers']:,} answers); all sources: postings {_mb(postings)} "
            f"({share:.0%} of invalidation_postings' {_mb(postings_table)}) + arrays "
            f"{_mb(arrays)} (inside provenance's {_mb(provenance)})",
        )
    )


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


def _mb(size: float) -> str:
    return f"{size / 2**20:,.0f} MB" if size >= 10 * 2**20 else f"{size / 2**10:,.0f} kB"
