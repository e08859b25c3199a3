"""Statistics follow each tenant's growth: the background round analyzes the tenant tables once
a tenant has outgrown what the statistics know, so a tenant appended beside an analyzed one is
planned as what it is, not as one row (lineage.services.statistics)."""

import asyncio
import json
from typing import Any

import asyncpg
import pytest

from lineage import db
from lineage.core.derive import derive_many
from lineage.db.database import Database
from lineage.db.named_sql import QUERIES
from lineage.services import auth, statistics
from lineage.services.tenant_deletion import delete_tenant
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from lineage.verifiable_log import storage
from tests.walks_helpers import FAN_TOTAL, PARTITION, explain_as_app, fan

RECORDS = f"provenance{PARTITION}"


async def no_autovacuum(owner: asyncpg.Connection) -> None:
    """Only the service analyzes, whatever autovacuum's timing."""
    for table in await owner.fetch(
        "SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace"
    ):
        await owner.execute(f"ALTER TABLE {table['relname']} SET (autovacuum_enabled = off)")


async def believed_records(pool: asyncpg.Pool, tenant_id: str) -> float:
    """How many records of the tenant the planner believes there are."""
    query = QUERIES["bundle_tenant_rows"]
    async with db.transaction(pool, tenant_id) as connection:
        text = await connection.fetchval(
            f"EXPLAIN (FORMAT JSON) {query.sql}", *query.arguments({"tenant_id": tenant_id})
        )
    plan = (json.loads(text) if isinstance(text, str) else text)[0]["Plan"]
    return float(sum(n["Plan Rows"] for n in nodes(plan) if n.get("Relation Name") == RECORDS))


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(node for child in plan.get("Plans", []) for node in nodes(child))]


async def filtered_reads(pool: asyncpg.Pool, tenant_id: str) -> list[tuple[Any, ...]]:
    """The walk-back's reads of the records that read rows only to drop them: each a scan of
    the tenant's records with the ids as a filter, not as the index condition."""
    plan = await explain_as_app(
        pool, "walk_back", tenant_id=tenant_id, context_id="fan_ans_0", max_depth=20
    )
    return [
        (n["Node Type"], n.get("Index Cond"), n.get("Filter"), n["Rows Removed by Filter"])
        for n in plan
        if n.get("Relation Name") == RECORDS and n.get("Rows Removed by Filter")
    ]


@pytest.fixture
async def grown(
    owner: asyncpg.Connection, owner_database: Database, database: Database
) -> PostgresStore:
    """Tenant default analyzed; tenant fresh appended since, FAN_TOTAL records."""
    await no_autovacuum(owner)
    await derive_many(PostgresStore(database), fan())
    await owner.execute("ANALYZE")
    assert await auth.create_tenant(owner_database, "fresh")
    fresh = PostgresStore(database, "fresh")
    await derive_many(fresh, fan())
    return fresh


async def test_the_round_analyzes_a_tenant_grown_beside_an_analyzed_one(
    grown: PostgresStore, database: Database, pool: asyncpg.Pool, owner: asyncpg.Connection
) -> None:
    assert FAN_TOTAL >= 2 * statistics.ANALYZE_FROM
    # The statistics know tenant default alone: fresh looks like a row or two, and its
    # walk-back reads all of its records at each level.
    assert await believed_records(pool, "fresh") < FAN_TOTAL / 100
    assert await filtered_reads(pool, "fresh")

    await storage.run_once(database, Settings(auth="none"))

    believed = await believed_records(pool, "fresh")
    assert FAN_TOTAL / 2 <= believed <= FAN_TOTAL * 2, believed
    assert await filtered_reads(pool, "fresh") == []
    counts = await owner.fetch("SELECT tenant, records FROM statistics_analyzed ORDER BY 1")
    assert [tuple(row) for row in counts] == [("default", FAN_TOTAL), ("fresh", FAN_TOTAL)]


async def test_the_round_analyzes_again_only_once_a_tenant_doubled(
    grown: PostgresStore, database: Database, owner: asyncpg.Connection
) -> None:
    tables = await owner.fetchval("SELECT lineage_statistics_tables()")
    assert await statistics.follow_growth(database) == tables
    assert await statistics.follow_growth(database) == []
    # Short of doubling, the statistics misjudge fresh by less than a factor of 2.
    await appended(owner, "fresh", 2 * FAN_TOTAL - 1)
    assert await statistics.follow_growth(database) == []
    await appended(owner, "fresh", 2 * FAN_TOTAL)
    assert await statistics.follow_growth(database) == tables
    # A tenant deleted and made anew under its name starts again below its old count.
    await appended(owner, "fresh", statistics.ANALYZE_FROM)
    assert await statistics.follow_growth(database) == tables


async def appended(owner: asyncpg.Connection, tenant_id: str, records: int) -> None:
    """Set the tenant's count of records appended, the growth the round measures."""
    await owner.execute(
        "UPDATE tenant_counters SET last_value = $2 WHERE tenant_id = $1 AND counter = 'events'",
        tenant_id,
        records,
    )


async def test_a_locked_table_is_skipped_at_once_and_analyzed_next_round(
    grown: PostgresStore, database: Database, owner: asyncpg.Connection, database_url: str
) -> None:
    """A conflicting lock (retention's partition DDL, another ANALYZE) stops the refresh without
    waiting in the lock queue, where the requests behind it would wait too; nothing is marked
    analyzed, so the next round tries again."""
    tables = await owner.fetchval("SELECT lineage_statistics_tables()")
    holder = await asyncpg.connect(database_url)
    try:
        async with holder.transaction():
            await holder.execute(f"LOCK TABLE {tables[1]} IN SHARE UPDATE EXCLUSIVE MODE")
            # A hang guard only: the refresh gives up after its lock_timeout (100 ms).
            async with asyncio.timeout(30):
                assert await statistics.follow_growth(database) == tables[:1]
        assert await owner.fetchval("SELECT count(*) FROM statistics_analyzed") == 0
    finally:
        await holder.close()
    assert await statistics.follow_growth(database) == tables
    assert await owner.fetchval("SELECT count(*) FROM statistics_analyzed") == 2


async def test_a_deleted_tenant_leaves_no_count_behind(
    grown: PostgresStore, database: Database, owner_database: Database, owner: asyncpg.Connection
) -> None:
    await statistics.follow_growth(database)
    await delete_tenant(owner_database, "fresh")
    tenants = await owner.fetch("SELECT tenant FROM statistics_analyzed")
    assert [row["tenant"] for row in tenants] == ["default"]


async def test_the_application_role_analyzes_only_the_tenant_tables(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as connection:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="analyzes only"):
            await connection.fetchval("SELECT lineage_analyze('audit_log')")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await connection.execute("DELETE FROM statistics_analyzed")
