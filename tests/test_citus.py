"""Lineage on Citus: a private coordinator and two workers (tests/citus_cluster.py), default
Citus settings. `lineage distribute` places every table; each named read is a single-shard
router query and answers what plain PostgreSQL answers on the same data."""

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import psycopg
import pytest
from typer.testing import CliRunner

from bench.run import ingest_rows, proposals
from lineage import cli, db
from lineage.core.derive import Context, derive
from lineage.core.errors import NotDistributable
from lineage.db.distribute import REFERENCE_TABLES, distribute
from lineage.db.migrate import migrate
from lineage.db.named_sql import QUERIES
from lineage.services import auth, privacy
from lineage.services.demo import TRACE_ID, load_incident
from lineage.store.postgres import PostgresStore
from tests.citus_cluster import CitusCluster, move_tenant_shards
from tests.conftest import database_at
from tests.test_privacy import check_text_is_captured_only_when_switched_on

pytestmark = [pytest.mark.citus, pytest.mark.slow]

TENANTS = ("default", "acme")
GENERATED = 1500  # records per tenant, besides the demo in each
WRITES = re.compile(r"\b(INSERT|UPDATE|DELETE)\b")
# Not reads of one tenant: every tenant's queue, the server version, a key before its tenant is
# known, tenant deletion, text capture, appends and log steps (writes, through their functions;
# tests/test_citus_writes.py plans the append), an advisory lock (no table), the postings' merge
# (every tenant's counters; a write, distributed like the append).
NOT_A_TENANT_READ = {
    "log_pending_tenants", "server_version", "key_lookup", "tenant_delete", "trace_span_lock",
    "claim_capture_text", "bundle_import_texts", "append_records", "log_lock_head", "log_advance",
    "postings_pending_tenants", "postings_merge",
}  # fmt: skip
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)
# Values that find demo rows, for every psql variable the reads use.
VALUES: dict[str, Any] = {
    "context_id": "answer_1",
    "context_ids": ["chunk_42", "claim_1", "answer_1", "doc_contractors_v1"],
    "max_depth": 20,
    "kind": "any",
    "source_uri": "s3://policies/contractors.md",
    "transform_version": "chunker@1.4",
    "index_snapshot": "idx_2026_08_01",
    "trace_id": TRACE_ID,
    "trace_ids": [TRACE_ID],
    "span_ids": [],
    "produced_by": "any",
    "since": EARLIEST,
    "until": LATEST,
    "after_created_at": EARLIEST,
    "after_context_id": "",
    "after_audit_id": 0,
    "embedding_model": "embedder-1",
    "page_size": 1000,
    "bucket": "1 day",
    "limit": 1000,
    "max_spans": 100,
    "batch_size": 1000,
    "levels": [0],
    "node_indexes": [0],
    "after": 0,
    "session_id": "any",
    "tree_size": 0,
    "content_hashes": [],
    "key_nos": [1, 2, 3],
    "source_uris": ["s3://policies/contractors.md"],
}
# Columns set by the clock of the server that ran the append, and signatures (which sign
# created_at): they differ between the two loads.
# 10 documents, 100 chunks (idx_up), 100 answers of 2 chunks each, and their 300 edges.
UPGRADE_RECORDS = """
INSERT INTO provenance (tenant_id, context_id, parent_ids, kind, content_hash, index_snapshot,
                        created_at, source_uri)
SELECT 'default', 'up_doc_' || i, '{}', 'document', 'sha256:' || repeat(md5('d' || i), 2),
       NULL, now(), 's3://up.md' FROM generate_series(0, 9) AS i
UNION ALL
SELECT 'default', 'up_chunk_' || i, ARRAY['up_doc_' || i % 10], 'chunk',
       'sha256:' || repeat(md5('c' || i), 2), 'idx_up', now(), NULL
FROM generate_series(0, 99) AS i
UNION ALL
SELECT 'default', 'up_ans_' || i, ARRAY['up_chunk_' || i, 'up_chunk_' || (i + 1) % 100],
       'answer', 'sha256:' || repeat(md5('a' || i), 2), NULL, now(), NULL
FROM generate_series(0, 99) AS i;
INSERT INTO provenance_children (tenant_id, parent_id, context_id, created_at)
SELECT tenant_id, unnest(parent_ids), context_id, created_at FROM provenance;
INSERT INTO root_sources (tenant_id, source_uri, kind, context_id, depth, created_at)
SELECT tenant_id, 's3://up.md', kind, context_id,
       CASE kind WHEN 'document' THEN 0 WHEN 'chunk' THEN 1 ELSE 2 END, created_at
FROM provenance;
"""
CLOCK_COLUMNS = {
    "created_at", "first_verdict_at", "at", "signed_at", "updated_at", "first_seen", "signature",
}  # fmt: skip


def tenant_reads() -> list[str]:
    body = {name: "\n".join(line for line in q.text.splitlines() if not line.startswith("--"))
            for name, q in QUERIES.items()}  # fmt: skip
    return sorted(
        name
        for name, text in body.items()
        if not WRITES.search(text) and name not in NOT_A_TENANT_READ
        and "tenant_id" in QUERIES[name].parameters
    )  # fmt: skip


async def load(url: str) -> None:
    """The demo and generated records in each tenant, through the append path."""
    async with database_at(url, as_owner=True) as owner, database_at(url) as database:
        await auth.create_tenant(owner, "acme")
        for tenant in TENANTS:
            # The same key for keyed text hashes on both servers, so the records are the same.
            async with owner.connection() as connection:
                await connection.execute(
                    "INSERT INTO tenant_text_keys VALUES ($1, sha256(convert_to($1, 'UTF8')))",
                    tenant,
                )
                await connection.execute(
                    "UPDATE tenant_settings SET text_hash_key = sha256(convert_to($1, 'UTF8')) "
                    "WHERE tenant_id = $1",
                    tenant,
                )
        for tenant in TENANTS:
            store = PostgresStore(database, tenant)
            await load_incident(store)
            generated = proposals(ingest_rows(GENERATED, f"gen_{tenant}", tenant))
            for start in range(0, len(generated), 500):
                await store.append(generated[start : start + 500])


@pytest.fixture(scope="module")
def citus_url(citus: CitusCluster) -> str:
    url = citus.create_database("lineage_citus")
    migrate(url)
    return url


@pytest.fixture(scope="module")
def loaded(citus_url: str, template_db: tuple[str, str]) -> Iterator[tuple[str, str]]:
    """(plain URL, Citus URL), the same records in both."""
    base, template = template_db
    from tests.conftest import janitor, url_for

    name = f"lineage_citus_plain_{uuid.uuid4().hex[:8]}"
    with janitor(base, name, template):
        plain = url_for(base, name)
        distribute(citus_url)
        asyncio.run(load(plain))
        asyncio.run(load(citus_url))
        yield plain, citus_url


def test_distribute_places_every_table_and_says_so_twice_alike(citus_url: str) -> None:
    first = CliRunner().invoke(cli.app, ["distribute"], env={"LINEAGE_DATABASE_URL": citus_url})
    assert first.exit_code == 0, first.output
    assert "provenance: distributed by tenant_id, colocated with tenants" in first.output
    assert "api_keys: reference table (a copy on every node)" in first.output
    with psycopg.connect(citus_url) as coordinator:
        placed: dict[str, str] = dict(
            coordinator.execute(
                "SELECT logicalrelid::regclass::text, partmethod::text || ':' || colocationid "
                "FROM pg_dist_partition JOIN pg_class AS c ON c.oid = logicalrelid "
                "WHERE NOT c.relispartition"  # month partitions follow their parent
            ).fetchall()
        )
        tenant_tables = {
            name
            for (name,) in coordinator.execute(
                "SELECT c.relname FROM pg_class AS c JOIN pg_attribute AS a "
                "ON a.attrelid = c.oid AND a.attname = 'tenant_id' "
                "WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') "
                "AND NOT c.relispartition"
            ).fetchall()
        }
        triggers = coordinator.execute(
            "SELECT tgrelid::regclass::text FROM pg_trigger "
            "WHERE NOT tgisinternal AND tgrelid::regclass::text = ANY (%s)",
            (sorted(tenant_tables),),
        ).fetchall()
    assert placed["api_keys"].startswith("n:")
    distributed = {name: how for name, how in placed.items() if name != "api_keys"}
    assert set(distributed) == tenant_tables - {"api_keys"}
    assert len(set(distributed.values())) == 1, distributed  # one colocation group
    assert next(iter(distributed.values())).startswith("h:")
    assert triggers == []
    again = CliRunner().invoke(cli.app, ["distribute"], env={"LINEAGE_DATABASE_URL": citus_url})
    assert again.exit_code == 0, again.output
    assert "provenance: already distributed by tenant_id" in again.output
    assert "distributed by tenant_id, colocated" not in again.output


def test_distribute_lets_lineage_captures_run_nested_where_migrate_could_not(
    citus: CitusCluster,
) -> None:
    """A database migrated before CREATE EXTENSION citus has lineage_captures without its Citus
    setting (a placeholder there, which only a superuser may set): distribute gives it one, on
    the coordinator and on every worker."""
    url = citus.create_database("lineage_citus_late")
    try:
        migrate(url)
        with psycopg.connect(url, autocommit=True) as coordinator:
            coordinator.execute(
                "ALTER FUNCTION lineage_captures(text, text) "
                "RESET citus.allow_nested_distributed_execution"
            )
            distribute(url)
            settings = coordinator.execute(
                "SELECT proconfig::text FROM pg_proc WHERE proname = 'lineage_captures'"
            ).fetchone()
            on_workers = coordinator.execute(
                "SELECT result FROM run_command_on_workers($$SELECT proconfig::text FROM pg_proc "
                "WHERE proname = 'lineage_captures'$$)"
            ).fetchall()
    finally:
        citus.drop_database("lineage_citus_late")
    nested = "citus.allow_nested_distributed_execution=on"
    assert settings is not None and nested in settings[0]
    assert len(on_workers) == 2 and all(nested in result for (result,) in on_workers), on_workers


def test_every_tenant_table_is_distributed_by_tenant_id_colocated_with_provenance(
    loaded: tuple[str, str],
) -> None:
    """Found by catalog, not listed by hand: every table of the schema with a tenant_id column
    (a partitioned table as one, its partitions with it), the event stream's and the counters'
    included, shares provenance's colocation group, so one tenant's rows of all of them are on
    one worker and move together."""
    with psycopg.connect(loaded[1]) as coordinator:
        tenant_tables = {
            name
            for (name,) in coordinator.execute(
                "SELECT c.relname FROM pg_class AS c JOIN pg_attribute AS a "
                "ON a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped "
                "WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') "
                "AND NOT c.relispartition"
            ).fetchall()
        }
        placed = {
            name: (method, column, group)
            for name, method, column, group in coordinator.execute(
                "SELECT logicalrelid::regclass::text, partmethod::text, "
                "column_to_column_name(logicalrelid, partkey), colocationid "
                "FROM pg_dist_partition"
            ).fetchall()
        }
    assert {"provenance", "events", "tenant_counters", "provenance_children"} <= tenant_tables
    group = placed["provenance"][2]
    for table in sorted(tenant_tables - set(REFERENCE_TABLES)):
        assert placed.get(table) == ("h", "tenant_id", group), table
    for table in REFERENCE_TABLES:
        assert placed[table][0] == "n", table


def test_distribute_refuses_a_server_without_citus(database_url: str) -> None:
    with pytest.raises(NotDistributable, match="citus extension is not installed"):
        distribute(database_url)
    refused = CliRunner().invoke(
        cli.app, ["distribute"], env={"LINEAGE_DATABASE_URL": database_url}
    )
    assert refused.exit_code == 1
    assert "citus extension is not installed" in refused.stderr


async def app_role_fetch(
    url: str, tenant: str, sql: str, arguments: list[Any]
) -> list[asyncpg.Record]:
    pool = await db.create_pool(url, max_size=1)
    try:
        async with db.transaction(pool, tenant) as connection:
            rows: list[asyncpg.Record] = await connection.fetch(sql, *arguments)
            return rows
    finally:
        await pool.close()


def arguments(name: str, tenant: str) -> list[Any]:
    values = {**VALUES, "tenant_id": tenant}
    missing = set(QUERIES[name].parameters) - set(values)
    assert not missing, f"{name}: add values for {sorted(missing)}"
    return QUERIES[name].arguments(values)


def comparable(rows: list[asyncpg.Record]) -> list[str]:
    return sorted(
        json.dumps({k: v for k, v in dict(row).items() if k not in CLOCK_COLUMNS}, default=str)
        for row in rows
    )


@pytest.mark.parametrize("name", tenant_reads())
def test_each_read_is_a_single_shard_router_query(loaded: tuple[str, str], name: str) -> None:
    _, citus_url = loaded
    plan = asyncio.run(
        app_role_fetch(
            citus_url, "acme", f"EXPLAIN (COSTS OFF) {QUERIES[name].sql}", arguments(name, "acme")
        )
    )
    text = "\n".join(row[0] for row in plan)
    assert "Task Count: 1\n" in text + "\n", text


@pytest.mark.parametrize("name", tenant_reads())
def test_each_read_answers_on_citus_what_it_answers_on_postgresql(
    loaded: tuple[str, str], name: str
) -> None:
    plain_url, citus_url = loaded
    for tenant in TENANTS:
        query = QUERIES[name]
        plain = asyncio.run(app_role_fetch(plain_url, tenant, query.sql, arguments(name, tenant)))
        citus = asyncio.run(app_role_fetch(citus_url, tenant, query.sql, arguments(name, tenant)))
        assert comparable(citus) == comparable(plain), (name, tenant)


def test_the_walks_find_the_demo_on_citus(loaded: tuple[str, str]) -> None:
    """Not only equal: the comparison must not pass by both answering nothing."""
    _, citus_url = loaded
    walked = asyncio.run(
        app_role_fetch(citus_url, "acme", QUERIES["walk_back"].sql, arguments("walk_back", "acme"))
    )
    hops = asyncio.run(
        app_role_fetch(
            citus_url, "acme", QUERIES["suspicious_hops"].sql, arguments("suspicious_hops", "acme")
        )
    )
    assert {row["context_id"] for row in walked} >= {"answer_1", "chunk_42", "doc_contractors_v1"}
    assert {row["reason"] for row in hops} >= {"old_transform_version", "source_changed"}


def test_a_distributed_database_upgrades_its_edges_and_root_sources(citus: CitusCluster) -> None:
    """Migrations 0026 to the newest on a database distributed and holding records at 0025:
    every edge is written anew with its child's kind on the shards; every record gets its
    postings, and invalidation answers from them; root_sources is keyed anew by depth, then
    moved into the records and the postings (0036), and a document's radius answers from
    them."""
    url = citus.create_database("lineage_citus_upgrade")
    migrate(url, "0025")
    distribute(url)
    with psycopg.connect(url) as coordinator:  # records and edges as 0025's append wrote them
        coordinator.execute(UPGRADE_RECORDS)
    migrate(url)
    with psycopg.connect(url) as coordinator:  # 0029: appends and log steps on their worker
        delegated = coordinator.execute(
            "SELECT p.proname FROM pg_dist_object AS d JOIN pg_proc AS p ON p.oid = d.objid "
            "WHERE d.distribution_argument_index IS NOT NULL ORDER BY 1"
        ).fetchall()
    assert delegated == [("lineage_append",), ("lineage_log_advance",), ("lineage_log_lock",)]
    edges = (
        "SELECT tenant_id, parent_key, coalesce(context_uuid::text, context_id), kind "
        "FROM provenance_children"
    )
    records = (
        "SELECT p.tenant_id, md5(parent.id)::uuid, p.context_id, p.kind FROM provenance AS p "
        "CROSS JOIN LATERAL unnest(p.parent_ids) AS parent (id)"
    )
    with psycopg.connect(url) as coordinator:
        rewritten = sorted(coordinator.execute(edges).fetchall())
        wanted = sorted(set(coordinator.execute(records).fetchall()))
        # 0032: every record has its postings, so invalidation below is an index read.
        unknown = coordinator.execute("SELECT count(*) FROM provenance WHERE upstream_keys IS NULL")
        assert unknown.fetchone() == (0,)
    assert len(rewritten) == 300
    assert rewritten == wanted
    name = "invalidate_ids_by_index_snapshot"
    values = {"tenant_id": "default", "index_snapshot": "idx_up", "kind": "answer", "max_depth": 20}
    answered = asyncio.run(
        app_role_fetch(url, "default", QUERIES[name].sql, QUERIES[name].arguments(values))
    )
    answers = sorted(f"up_ans_{i}" for i in range(100))
    assert sorted(row["context_id"] for row in answered) == answers
    name, values = "blast_radius_ids_by_source", {**values, "source_uri": "s3://up.md"}
    listed = asyncio.run(
        app_role_fetch(url, "default", QUERIES[name].sql, QUERIES[name].arguments(values))
    )
    assert [(row["depth"], row["context_id"]) for row in listed] == [(2, a) for a in answers]


def test_after_a_tenants_shards_move_every_read_still_runs_on_one_shard_and_answers_alike(
    loaded: tuple[str, str],
) -> None:
    """As after a rebalance or moving a hot tenant: citus_move_shard_placement of acme's shard
    group to the other worker, then every read again."""
    plain_url, citus_url = loaded
    before, after = move_tenant_shards(citus_url, "acme")
    with psycopg.connect(citus_url) as coordinator:
        ports = {
            port
            for (port,) in coordinator.execute(
                "SELECT DISTINCT nodeport FROM citus_shards "
                "WHERE shardid IN (SELECT get_shard_id_for_distribution_column(logicalrelid, "
                "'acme'::text) FROM pg_dist_partition WHERE partmethod = 'h')"
            ).fetchall()
        }
    assert ports == {after} != {before}
    for name in tenant_reads():
        query = QUERIES[name]
        for tenant in TENANTS:
            values = arguments(name, tenant)
            plain = asyncio.run(app_role_fetch(plain_url, tenant, query.sql, values))
            citus = asyncio.run(app_role_fetch(citus_url, tenant, query.sql, values))
            assert comparable(citus) == comparable(plain), (name, tenant)
        plan = asyncio.run(
            app_role_fetch(
                citus_url, "acme", f"EXPLAIN (COSTS OFF) {query.sql}", arguments(name, "acme")
            )
        )
        text = "\n".join(row[0] for row in plan)
        assert "Task Count: 1\n" in text + "\n", (name, text)
    walked = asyncio.run(app_role_fetch(citus_url, "acme", QUERIES["walk_back"].sql,
                                        arguments("walk_back", "acme")))  # fmt: skip
    assert {row["context_id"] for row in walked} >= {"answer_1", "chunk_42"}


@pytest.fixture
async def citus_pool(loaded: tuple[str, str]) -> AsyncIterator[asyncpg.Pool]:
    pool = await db.create_pool(loaded[1], max_size=2)
    yield pool
    await pool.close()


async def test_a_read_with_no_tenant_set_raises_on_citus_too(citus_pool: asyncpg.Pool) -> None:
    async with citus_pool.acquire() as connection:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="tenant_id is not set"):
            await connection.fetch(QUERIES["walk_back"].sql, *arguments("walk_back", "acme"))


async def test_another_tenants_records_stay_hidden_on_citus(citus_pool: asyncpg.Pool) -> None:
    async with db.transaction(citus_pool, "default") as connection:
        seen = await connection.fetch("SELECT DISTINCT tenant_id FROM provenance")
        foreign = await connection.fetch(QUERIES["walk_back"].sql, *arguments("walk_back", "acme"))
    assert [row["tenant_id"] for row in seen] == ["default"]
    assert foreign == []


def a_tenant_on_each_shard(url: str, table: str) -> dict[int, str]:
    """A tenant id hashed to each shard of the table: {shard id: tenant}."""
    with psycopg.connect(url) as coordinator:
        shards = {
            shard
            for (shard,) in coordinator.execute(
                "SELECT shardid FROM pg_dist_shard WHERE logicalrelid = %s::regclass", (table,)
            ).fetchall()
        }
        found: dict[int, str] = {}
        for number in range(100 * len(shards)):
            name = f"shard_{number}"
            row = coordinator.execute(
                "SELECT get_shard_id_for_distribution_column(%s, %s::text)", (table, name)
            ).fetchone()
            assert row is not None
            found.setdefault(row[0], name)
            if set(found) == shards:
                return found
    raise AssertionError(f"no tenant id found for some shards of {table}")


async def insert_text_on_the_worker(
    citus_url: str, port: int, shard_name: str, tenant: str, query: Context
) -> None:
    """As the application role, straight into the shard on the worker that holds it, with the
    tenant vouched for (the owner's key, as the service holds it)."""
    owner = await asyncpg.connect(citus_url)
    try:
        key = await db.fetch_vouching_key(owner)
    finally:
        await owner.close()
    worker = await asyncpg.connect(
        f"postgresql://{db.APP_ROLE}@127.0.0.1:{port}/{citus_url.rsplit('/', 1)[1]}"
    )
    try:
        async with worker.transaction():
            await worker.execute(db.set_tenant_sql(tenant, key))
            await worker.execute(
                f"INSERT INTO {shard_name} (tenant_id, context_id, text) VALUES ($1, $2, $3)",
                tenant, query.context_id, query.text,
            )  # fmt: skip
    finally:
        await worker.close()


async def test_the_captured_text_rule_holds_on_every_shard(loaded: tuple[str, str]) -> None:
    """A restrictive policy becomes permissive on Citus's shards: text was captured with capture
    off. The rule holds on every shard of context_text, through the coordinator and on the
    worker holding the shard."""
    citus_url = loaded[1]
    tenants = a_tenant_on_each_shard(citus_url, "context_text")
    with psycopg.connect(citus_url) as coordinator:
        placements = coordinator.execute(
            "SELECT shardid, shard_name, nodeport FROM citus_shards "
            "WHERE table_name = 'context_text'::regclass"
        ).fetchall()
    assert len({port for _, _, port in placements}) == 2  # both workers hold shards
    async with database_at(citus_url, as_owner=True) as owner, database_at(citus_url) as database:
        for shard, shard_name, port in placements:
            tenant = tenants[shard]
            assert await auth.create_tenant(owner, tenant)
            query = await derive(
                PostgresStore(database, tenant), [],
                f"{tenant}'s salary?", "query",
                source_uri="chat://citus",
            )  # fmt: skip
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
                await insert_text_on_the_worker(citus_url, port, shard_name, tenant, query)

            async def switch_on(switch: str, tenant: str = tenant) -> None:
                # The service's own path: a column-level grant, which Citus does not carry to
                # the shards, refused it there before migration 0015.
                caller = auth.Caller(tenant, None, "admin")
                await privacy.update_settings(database, caller, {switch: True})

            await check_text_is_captured_only_when_switched_on(database, tenant, query, switch_on)
