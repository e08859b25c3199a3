"""Statistics follow a tenant's growth on Citus: the round's ANALYZE on the coordinator reaches
every shard, where each tenant's router query is planned (lineage.services.statistics)."""

import asyncio
import json
from typing import Any

import asyncpg
import pytest

from lineage import db
from lineage.core.derive import derive_many
from lineage.db.distribute import distribute
from lineage.db.migrate import migrate
from lineage.db.named_sql import QUERIES
from lineage.services import auth, statistics
from lineage.store.postgres import PostgresStore
from tests.citus_cluster import CitusCluster
from tests.conftest import database_at
from tests.walks_helpers import FAN_TOTAL, PARTITION, fan

pytestmark = [pytest.mark.citus, pytest.mark.slow]

DATABASE = "lineage_statistics"
RECORDS = f"provenance{PARTITION}_"  # a shard's name: the partition's, then the shard's id


def planned_records(plan: Any) -> float:
    """The rows the plan (the worker's remote plan within it, on Citus) expects from the
    records' shards."""
    if isinstance(plan, list):
        return sum(planned_records(item) for item in plan)
    if not isinstance(plan, dict):
        return 0.0
    own = plan["Plan Rows"] if str(plan.get("Relation Name", "")).startswith(RECORDS) else 0
    return own + sum(planned_records(value) for value in plan.values())


async def believed_records(pool: asyncpg.Pool, tenant_id: str) -> float:
    query = QUERIES["bundle_tenant_rows"]
    async with db.transaction(pool, tenant_id) as connection:
        text = await connection.fetchval(
            f"EXPLAIN (FORMAT JSON) {query.sql}", *query.arguments({"tenant_id": tenant_id})
        )
    return planned_records(json.loads(text) if isinstance(text, str) else text)


async def load(url: str) -> None:
    async with database_at(url, as_owner=True) as owner:
        assert await auth.create_tenant(owner, "fresh")
        async with owner.connection() as connection:
            for table in (f"provenance{PARTITION}",):  # only the round analyzes
                await connection.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
    async with database_at(url) as database:
        await derive_many(PostgresStore(database), fan())
    async with database_at(url, as_owner=True) as owner, owner.connection() as connection:
        await connection.execute("ANALYZE")
    async with database_at(url) as database:
        await derive_many(PostgresStore(database, "fresh"), fan())


@pytest.fixture(scope="module")
def citus_url(citus: CitusCluster) -> str:
    url = citus.create_database(DATABASE)
    migrate(url)
    distribute(url)
    asyncio.run(load(url))
    return url


async def test_the_round_analyzes_every_shard_on_citus(citus_url: str) -> None:
    async with database_at(citus_url) as database:
        assert await believed_records(database.pool, "fresh") < FAN_TOTAL / 100
        tables = await statistics.follow_growth(database)
        assert "provenance" in tables
        believed = await believed_records(database.pool, "fresh")
        assert FAN_TOTAL / 2 <= believed <= FAN_TOTAL * 2, believed
        assert await statistics.follow_growth(database) == []


async def test_a_shard_locked_on_its_worker_is_skipped_at_once(citus_url: str) -> None:
    """The workers analyzing the shards give up after the coordinator's lock_timeout too: a
    shard's lock (a shard move's) stops the refresh instead of queueing it on the worker."""
    async with database_at(citus_url, as_owner=True) as owner, owner.connection() as connection:
        shard, port = await connection.fetchrow(
            "SELECT shard_name, nodeport FROM citus_shards "
            "WHERE table_name = $1::regclass "
            "AND shardid = get_shard_id_for_distribution_column($1::regclass, 'fresh')",
            f"provenance{PARTITION}",
        )
        await connection.execute(
            "UPDATE tenant_counters SET last_value = 10 * last_value "
            "WHERE tenant_id = 'fresh' AND counter = 'events'"
        )
    worker = await asyncpg.connect(f"postgresql://postgres@127.0.0.1:{port}/{DATABASE}")
    try:
        async with worker.transaction():
            await worker.execute("SET LOCAL citus.enable_manual_changes_to_shards = on")
            await worker.execute(f"LOCK TABLE {shard} IN SHARE UPDATE EXCLUSIVE MODE")
            async with database_at(citus_url) as database, asyncio.timeout(30):
                assert await statistics.follow_growth(database) == []
    finally:
        await worker.close()
    async with database_at(citus_url) as database:
        assert "provenance" in await statistics.follow_growth(database)
