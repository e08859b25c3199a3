"""The first export after an import or a bulk load plans as in steady state: the import's
sequencing fills log_leaves after its last ANALYZE, so the export refreshes the
statistics the planner would otherwise take for an empty log; and beside a tenant whose rows
the statistics counted, where they look fresh but know nothing of the new tenant, the export's
query reads a few rows a leaf whatever plan they give (bench/export_after_import.py times both;
these check the statistics and the rows read)."""

import json
import uuid
from pathlib import Path
from typing import Any

import asyncpg

from lineage import db
from lineage.bundle.export import ANALYZE_FROM, export_bundle, stale_statistics
from lineage.bundle.load import import_bundle
from lineage.core.derive import Derivation, derive_many
from lineage.db.database import Database
from lineage.db.named_sql import QUERIES
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from lineage.verifiable_log import storage
from tests.conftest import database_at, janitor, url_for

RECORDS = 2 * ANALYZE_FROM
LOG_TABLES = ("log_leaves",)


async def load_records(store: PostgresStore) -> None:
    """Documents and their chunks, RECORDS in all."""
    documents = RECORDS // 20
    items = [Derivation([], f"document {d}", "document", "loader", "1",
                        source_uri=f"s3://plans/{d}", context_id=f"plan_doc_{d}")
             for d in range(documents)]  # fmt: skip
    items += [Derivation([f"plan_doc_{c % documents}"], f"chunk {c}", "chunk", "chunker", "2",
                         context_id=f"plan_chunk_{c}")
              for c in range(RECORDS - documents)]  # fmt: skip
    await derive_many(store, items)


def shape(plan: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What a plan does, without its costs: each node's type, join, table and index."""
    node = (plan["Node Type"], plan.get("Join Type"), plan.get("Relation Name"),
            plan.get("Index Name"))  # fmt: skip
    return [node] + [step for child in plan.get("Plans", []) for step in shape(child)]


async def export_plan(database: Database, tenant_id: str, tree_size: int) -> list[tuple[Any, ...]]:
    """The plan the planner picks now for the export's query (sql/bundle_records.sql)."""
    query = QUERIES["bundle_records"]
    arguments = query.arguments({"tenant_id": tenant_id, "tree_size": tree_size})
    async with db.transaction(database.pool, tenant_id) as connection:
        text = await connection.fetchval(f"EXPLAIN (FORMAT JSON) {query.sql}", *arguments)
    document = json.loads(text) if isinstance(text, str) else text
    return shape(document[0]["Plan"])


async def analyzed(connection: asyncpg.Connection) -> dict[str, bool]:
    rows = await connection.fetch(
        "SELECT relname, coalesce(last_analyze, last_autoanalyze) IS NOT NULL AS analyzed "
        "FROM pg_stat_user_tables WHERE relname = ANY ($1::text[])",
        list(LOG_TABLES),
    )
    return {row["relname"]: row["analyzed"] for row in rows}


async def test_the_first_export_after_an_import_plans_on_fresh_statistics(
    store: PostgresStore, owner_database: Database, template_db: tuple[str, str], tmp_path: Path
) -> None:
    settings = Settings()
    await load_records(store)
    bundle = tmp_path / "source.bundle"
    await export_bundle(owner_database, settings, "default", bundle, include_text=False)
    base, template = template_db
    name = f"lineage_imported_{uuid.uuid4().hex[:12]}"
    target_url = url_for(base, name)
    with janitor(base, name, template):
        async with (
            database_at(target_url, settings, as_owner=True) as target,
            target.connection() as connection,
        ):
            # No autovacuum may analyze the log behind the test's back: only the export.
            for table in LOG_TABLES:
                await connection.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")
            verifier = storage.signing_key(settings).verifier
            imported = await import_bundle(target, settings, bundle, "moved", verifier)
            size = imported.tree_size
            assert size == RECORDS
            # Right after the import the planner takes the log for empty.
            assert set(LOG_TABLES) <= set(await stale_statistics(target, "moved", size))
            assert await analyzed(connection) == dict.fromkeys(LOG_TABLES, False)

            await export_bundle(
                target, settings, "moved", tmp_path / "moved.bundle", include_text=False
            )
            assert await stale_statistics(target, "moved", size) == []
            assert await analyzed(connection) == dict.fromkeys(LOG_TABLES, True)
            after_export = await export_plan(target, "moved", size)

            # The plan of steady state: every table analyzed afresh.
            await connection.execute("ANALYZE")
            assert await export_plan(target, "moved", size) == after_export


def rows_read(plan: dict[str, Any]) -> int:
    """Rows every scan of an analyzed plan returned or filtered out, over all its loops."""
    read = 0
    if "Relation Name" in plan:
        rows = plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)
        read = rows * plan.get("Actual Loops", 0)
    return read + sum(rows_read(child) for child in plan.get("Plans", []))


async def rows_read_exporting(database: Database, tenant_id: str, tree_size: int) -> int:
    """The rows the export's query reads now (it runs, under EXPLAIN ANALYZE)."""
    query = QUERIES["bundle_records"]
    arguments = query.arguments({"tenant_id": tenant_id, "tree_size": tree_size})
    async with db.transaction(database.pool, tenant_id) as connection:
        text = await connection.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {query.sql}", *arguments)
    plan = (json.loads(text) if isinstance(text, str) else text)[0]["Plan"]
    assert plan["Actual Rows"] == tree_size
    return rows_read(plan)


async def analyzed_with_default_only(owner: asyncpg.Connection) -> None:
    """Statistics taken while only the default tenant had rows, kept from autovacuum."""
    await owner.execute("ANALYZE")
    for table in (*LOG_TABLES, "provenance_children_p_open", "invalidation_postings_p_open"):
        await owner.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")


async def test_an_import_beside_an_analyzed_tenant_is_exported_in_a_few_reads_a_leaf(
    store: PostgresStore, owner_database: Database, owner: asyncpg.Connection, tmp_path: Path
) -> None:
    """Statistics that knew only another tenant say the new one has no rows, though they count
    as many as its log: planned on them, the export compared every leaf with every leaf hash
    of the tenant (196 s for 50,000 records, 5.5 s in steady state)."""
    settings = Settings()
    await load_records(store)
    bundle = tmp_path / "source.bundle"
    await export_bundle(owner_database, settings, "default", bundle, include_text=False)
    await analyzed_with_default_only(owner)
    verifier = storage.signing_key(settings).verifier
    imported = await import_bundle(owner_database, settings, bundle, "moved", verifier)
    # The import analyzed provenance: the export's plan reads a few rows a leaf without more.
    assert await stale_statistics(owner_database, "moved", imported.tree_size) == []
    assert await rows_read_exporting(owner_database, "moved", imported.tree_size) <= 10 * RECORDS


async def test_a_bulk_load_beside_an_analyzed_tenant_is_exported_in_a_few_reads_a_leaf(
    store: PostgresStore, owner_database: Database, owner: asyncpg.Connection
) -> None:
    """Planned on statistics that knew only another tenant, the export read every root source
    of the tenant for each leaf, to pass on the roots of expired leaves, of which a log without
    expiry has none (36x its steady time)."""
    await load_records(store)
    await storage.checkpoint(owner_database, Settings(), "default")
    await analyzed_with_default_only(owner)
    await db.fetch(owner, "tenant_create", tenant_id="beside")
    await load_records(PostgresStore(store.database, "beside"))
    size = (await storage.checkpoint(owner_database, Settings(), "beside")).checkpoint.tree_size
    # The tables' counts look fresh; the planner takes the tenant for one record.
    assert await stale_statistics(owner_database, "beside", size) == ["provenance"]
    assert await rows_read_exporting(owner_database, "beside", size) <= 10 * RECORDS
