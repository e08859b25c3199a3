"""The event stream's positions on Citus: the same SQL (the append, sql/append_records.sql,
events_after.sql, event_horizon.sql) on the schema `lineage migrate` makes, placed by `lineage
distribute` (every tenant table by tenant_id, colocated). Positions come from the tenant's
counter row on its shard, never from a node's transaction ids: they are dense per tenant, each
query is routed to one shard, a tenant's appends wait for each other on the worker, and after
the tenant's shard moves to the other worker a stream resumed from its last position misses
nothing."""

import asyncio
import uuid
from datetime import UTC, datetime

import asyncpg
import psycopg
import pytest

from lineage import db
from lineage.db.distribute import distribute
from lineage.db.migrate import migrate
from lineage.db.named_sql import QUERIES
from tests.citus_cluster import CitusCluster

pytestmark = [pytest.mark.citus, pytest.mark.slow]

HANG_GUARD_S = 30.0
TENANTS = ("acme", "rival", "waits", "mover", "heard")


@pytest.fixture(scope="module")
def coordinator(citus: CitusCluster) -> str:
    url = citus.create_database(f"lineage_events_{uuid.uuid4().hex[:8]}")
    migrate(url)
    distribute(url)
    with psycopg.connect(url) as owner:
        for tenant in TENANTS:
            owner.execute("INSERT INTO tenants (tenant_id) VALUES (%s)", (tenant,))
    return url


def appending(tenant_id: str, token: str, ids: list[str]) -> dict[str, object]:
    """sql/append_records.sql's values for documents `ids` (signatures unchecked here)."""
    count = len(ids)
    return {
        "tenant_id": tenant_id,
        "tenant_token": token,
        "context_ids": ids,
        "is_uuids": [False] * count,
        "parent_id_lists": ["{}"] * count,
        "kinds": ["document"] * count,
        "source_uris": [f"s3://{i}" for i in ids],
        "content_hashes": ["sha256:00"] * count,
        **dict.fromkeys(
            ("transforms", "transform_versions", "version_keys", "produced_bys"), [None] * count
        ),
        "index_snapshots": [None] * count,
        "trace_ids": [None] * count,
        "created_ats": [datetime.now(UTC)] * count,
        "attribute_docs": ["{}"] * count,
        "key_ids": ["k"] * count,
        "signatures": [b"s"] * count,
        "keys": [f"source:s3://{i}" for i in ids],
        "upstream_key_lists": ["{}"] * count,
        "upstream_depth_lists": ["{}"] * count,
        "root_source_lists": [f"{{{n}}}" for n in range(1, count + 1)],
        "root_depth_lists": ["{0}"] * count,
        "posting_keys": list(range(1, count + 1)),
        "posting_kinds": ["document"] * count,
        "posting_depths": [0] * count,
        "posting_created_ats": [datetime.now(UTC)] * count,
        "posting_uuid_lists": [None] * count,
        "posting_id_lists": [f'{{"{i}"}}' for i in ids],
    }


async def token_for(connection: asyncpg.Connection, tenant_id: str) -> str:
    return db.tenant_token(bytes(await db.fetch_vouching_key(connection) or b""), tenant_id)


async def append(connection: asyncpg.Connection, tenant_id: str, ids: list[str]) -> int:
    """What the service does for the stream: append the records, numbered in the same call."""
    query = QUERIES["append_records"]
    values = appending(tenant_id, await token_for(connection, tenant_id), ids)
    row = await connection.fetchrow(query.sql, *query.arguments(values))
    assert row is not None
    position: int = row["last_position"]
    return position


async def read_after(connection: asyncpg.Connection, tenant_id: str, after: int) -> list[str]:
    query = QUERIES["events_after"]
    values = {
        "tenant_id": tenant_id,
        "after": after,
        "trace_id": "any",
        "session_id": "any",
        "page_size": 500,
    }
    rows = await connection.fetch(query.sql, *query.arguments(values))
    return [row["context_id"] for row in rows if row["position"] is not None]


async def task_counts(
    connection: asyncpg.Connection, name: str, values: dict[str, object]
) -> set[int]:
    """The Task Count of each distributed step of the query's plan (a CTE may be its own)."""
    query = QUERIES[name]
    plan = await connection.fetch(f"EXPLAIN {query.sql}", *query.arguments(values))
    counts = {int(row[0].split(":")[1]) for row in plan if "Task Count" in row[0]}
    assert counts, plan
    return counts


async def test_positions_are_dense_per_tenant_and_each_query_runs_on_one_shard(
    coordinator: str,
) -> None:
    connection = await asyncpg.connect(coordinator)
    try:
        async with connection.transaction():
            assert await append(connection, "acme", ["a1", "a2"]) == 2
        async with connection.transaction():
            assert await append(connection, "rival", ["r1"]) == 1
            assert await append(connection, "acme", ["a3"]) == 3  # another transaction's turn
        assert await read_after(connection, "acme", 0) == ["a1", "a2", "a3"]
        assert await read_after(connection, "acme", 2) == ["a3"]
        assert await read_after(connection, "rival", 0) == ["r1"]
        reading = {"tenant_id": "acme", "after": 0, "trace_id": "any", "session_id": "any"}
        assert await task_counts(connection, "events_after", {**reading, "page_size": 10}) == {1}
        assert await task_counts(connection, "event_horizon", {"tenant_id": "acme"}) == {1}
        numbering = appending("acme", await token_for(connection, "acme"), ["x"])
        async with connection.transaction():
            assert await task_counts(connection, "append_records", numbering) == {1}
    finally:
        await connection.close()


async def until_a_lock_wait(url: str) -> None:
    """Wait until Citus shows one distributed transaction blocked by another."""
    watcher = await asyncpg.connect(url)
    try:
        for _ in range(int(HANG_GUARD_S / 0.02)):
            if await watcher.fetchval("SELECT count(*) FROM citus_lock_waits"):
                return
            await asyncio.sleep(0.02)
        raise AssertionError("the second append never waited for the first")
    finally:
        await watcher.close()


async def test_a_tenants_second_append_waits_for_the_first_to_commit(coordinator: str) -> None:
    first = await asyncpg.connect(coordinator)
    second = await asyncpg.connect(coordinator)
    try:
        async with first.transaction():
            early = await append(first, "waits", ["w1"])

            async def later() -> int:
                async with second.transaction():
                    return await append(second, "waits", ["w2"])

            waiting = asyncio.create_task(later())
            await until_a_lock_wait(coordinator)
            assert not waiting.done()
        async with asyncio.timeout(HANG_GUARD_S):
            assert (early, await waiting) == (1, 2)
        assert await read_after(first, "waits", 0) == ["w1", "w2"]
    finally:
        await first.close()
        await second.close()


async def test_a_stream_resumed_after_its_tenants_shard_moved_misses_nothing(
    coordinator: str,
) -> None:
    connection = await asyncpg.connect(coordinator)
    try:
        async with connection.transaction():
            await append(connection, "mover", ["m1", "m2"])
        assert await read_after(connection, "mover", 0) == ["m1", "m2"]
        shard = await connection.fetchrow(
            "SELECT shardid, nodename, nodeport FROM citus_shards "
            "WHERE table_name = 'events'::regclass "
            "AND shardid = get_shard_id_for_distribution_column('events', 'mover')"
        )
        target = await connection.fetchrow(
            "SELECT node_name, node_port FROM citus_get_active_worker_nodes() "
            "WHERE node_port <> $1",
            shard["nodeport"],
        )
        await connection.execute(
            "SELECT citus_move_shard_placement($1, $2, $3, $4, $5)",
            shard["shardid"],
            shard["nodename"],
            shard["nodeport"],
            target["node_name"],
            target["node_port"],
        )
        async with connection.transaction():
            assert await append(connection, "mover", ["m3"]) == 3
        assert await read_after(connection, "mover", 2) == ["m3"]
        assert await read_after(connection, "mover", 0) == ["m1", "m2", "m3"]
    finally:
        await connection.close()


async def test_the_append_notifies_on_the_coordinator_at_commit(coordinator: str) -> None:
    listener = await asyncpg.connect(coordinator)
    writer = await asyncpg.connect(coordinator)
    heard: asyncio.Queue[str] = asyncio.Queue()
    try:
        await listener.add_listener("lineage_events", lambda *args: heard.put_nowait(args[-1]))
        notify = QUERIES["events_notify"]
        async with writer.transaction():
            position = await append(writer, "heard", ["h1"])
            # A statement that names no table: Citus runs it on the coordinator, not a worker.
            await writer.execute(notify.sql, *notify.arguments({"payload": f"{position}:heard"}))
            assert heard.empty()  # sent at commit, not before
        async with asyncio.timeout(HANG_GUARD_S):
            assert await heard.get() == "1:heard"
    finally:
        await listener.close()
        await writer.close()
