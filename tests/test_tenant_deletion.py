"""Tenant deletion: every row of the tenant in every table (found by catalog), nothing of any
other tenant, a receipt in the operator's audit trail, and only the owner may do it."""

import json
from datetime import UTC, datetime

import asyncpg
import pytest
from typer.testing import CliRunner

from lineage import cli
from lineage.claims.answers import capture_texts
from lineage.core.errors import Forbidden, NotFound
from lineage.db.database import Database
from lineage.services import audit, auth, privacy
from lineage.services.auth import Caller
from lineage.services.demo import INCIDENT, load_incident, verify_incident
from lineage.services.tenant_deletion import delete_tenant
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from lineage.verifiable_log import storage
from tests.test_log import documents

SPAN = {
    "span_trace_ids": ["4bf92f3577b34da6a3ce929d0e0e4736"],
    "span_ids": ["00f067aa0ba902b7"],
    "parent_span_ids": [None],
    "span_names": ["retrieve"],
    "span_kinds": ["INTERNAL"],
    "service_names": [None],
    "start_times": [datetime(2026, 1, 1, tzinfo=UTC)],
    "end_times": [datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)],
    "status_codes": ["UNSET"],
    "status_messages": [None],
    "attribute_docs": ["{}"],
}


LEAVES = 16


async def tenant_tables(owner: asyncpg.Connection) -> list[str]:
    """Every table of the schema with a tenant_id column, from the catalog."""
    rows = await owner.fetch(
        "SELECT c.relname FROM pg_class AS c "
        "JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attname = 'tenant_id' "
        "WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') "
        "AND NOT c.relispartition ORDER BY 1"
    )
    return [row["relname"] for row in rows]


async def rows_per_table(owner: asyncpg.Connection, tenant_id: str) -> dict[str, int]:
    counts = {}
    for table in await tenant_tables(owner):
        counts[table] = await owner.fetchval(
            f"SELECT count(*) FROM {table} WHERE tenant_id = $1",  # names from the catalog
            tenant_id,
        )
    return counts


async def fill_tenant(database: Database, owner_database: Database, tenant_id: str) -> None:
    """Rows in as many tables as the service writes: records, signatures, verdicts, text, a key,
    audit, a span, the log and a checkpoint (events and root sources follow the records)."""
    await auth.create_tenant(owner_database, tenant_id)
    await load_incident(PostgresStore(database, tenant_id))
    await verify_incident(database, tenant_id)
    caller = Caller(tenant_id, None, "admin")
    await privacy.update_settings(database, caller, {"capture_source_text": True})
    await capture_texts(database, tenant_id, {"chunk_42": INCIDENT[2].text})
    await auth.create_key(database, tenant_id, "read", "test")
    await audit.record(database, caller, "walk", "answer_1")
    async with database.tenant(tenant_id) as tx:
        await tx.execute("append_spans", **SPAN)
    # The log keeps a subtree row from level 4 up: sixteen leaves and more.
    await PostgresStore(database, tenant_id).append(documents(LEAVES))
    await storage.checkpoint(database, Settings(), tenant_id)
    await load_incident(PostgresStore(database, tenant_id))  # nothing new: a replay
    async with owner_database.connection() as owner, owner.transaction():
        # What retention keeps of an expired month (tests/test_retention.py expires one).
        await owner.execute("SELECT set_config('lineage.tenant_id', $1, true)", tenant_id)
        await owner.execute(
            "INSERT INTO forget_tombstones SELECT tenant_id, context_id, parent_ids, kind, "
            "source_uri, content_hash, transform, transform_version, produced_by, "
            "index_snapshot, trace_id, created_at, attributes, NULL, NULL "
            "FROM provenance WHERE tenant_id = $1 LIMIT 1",
            tenant_id,
        )
        await owner.execute("INSERT INTO tenant_expiry VALUES ($1, now())", tenant_id)


@pytest.fixture
async def two_tenants(database: Database, owner_database: Database) -> None:
    for tenant_id in ("doomed", "kept"):
        await fill_tenant(database, owner_database, tenant_id)


async def test_every_row_of_the_tenant_goes_and_no_other_tenants(
    two_tenants: None, owner_database: Database, owner: asyncpg.Connection
) -> None:
    before = await rows_per_table(owner, "doomed")
    kept_before = await rows_per_table(owner, "kept")
    empty = sorted(table for table, count in before.items() if count == 0)
    assert empty == ["tenant_deleting"], "the fixture leaves a table unfilled"
    [latest] = await owner.fetch(
        "SELECT note FROM log_checkpoints WHERE tenant_id = 'doomed' "
        "ORDER BY tree_size DESC LIMIT 1"
    )

    receipt = await delete_tenant(owner_database, "doomed")

    after = await rows_per_table(owner, "doomed")
    assert after == dict.fromkeys(after, 0)
    assert before["invalidation_postings"] > 0 and after["invalidation_postings"] == 0
    assert await rows_per_table(owner, "kept") == kept_before
    assert receipt["tenant_id"] == "doomed"
    assert receipt["rows"] == {t: n for t, n in before.items() if t != "tenant_deleting"}
    assert receipt["last_checkpoint"]["note"] == latest["note"]
    assert receipt["last_checkpoint"]["tree_size"] == before["log_leaves"]
    [entry] = await owner.fetch("SELECT operator, action, target, detail FROM operator_audit")
    assert (entry["action"], entry["target"]) == ("tenant_delete", "doomed")
    assert entry["operator"] == await owner.fetchval("SELECT session_user")
    assert json.loads(entry["detail"]) == receipt


async def test_the_triggers_refuse_again_after_a_deletion(
    two_tenants: None, owner_database: Database, owner: asyncpg.Connection
) -> None:
    await delete_tenant(owner_database, "doomed")
    for statement in (
        "DELETE FROM provenance WHERE tenant_id = 'kept'",
        "DELETE FROM audit_log WHERE tenant_id = 'kept'",
        "UPDATE operator_audit SET target = 'x'",
        "DELETE FROM operator_audit",
        "TRUNCATE operator_audit",
    ):
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await owner.execute(statement)
    # A tenant being deleted is marked only inside the deleting transaction.
    assert await owner.fetchval("SELECT count(*) FROM tenant_deleting") == 0


async def test_the_application_role_is_refused(
    two_tenants: None, pool: asyncpg.Pool, database: Database, owner: asyncpg.Connection
) -> None:
    with pytest.raises(Forbidden, match="owner"):
        await delete_tenant(database, "doomed")
    async with pool.acquire() as connection:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await connection.execute("SELECT lineage_delete_tenant('doomed')")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await connection.execute("INSERT INTO tenant_deleting VALUES ('doomed')")
    assert (await rows_per_table(owner, "doomed"))["provenance"] == len(INCIDENT) + 2 + LEAVES


async def test_an_unknown_tenant_is_not_found(owner_database: Database) -> None:
    with pytest.raises(NotFound, match="no tenant 'nobody'"):
        await delete_tenant(owner_database, "nobody")


def test_the_cli_deletes_only_once_the_name_is_typed(
    database_url: str, owner: asyncpg.Connection
) -> None:
    runner = CliRunner()
    env = {"LINEAGE_DATABASE_URL": database_url}
    assert runner.invoke(cli.app, ["tenant", "create", "acme"], env=env).exit_code == 0
    wrong = runner.invoke(cli.app, ["tenant", "delete", "acme"], input="acne\n", env=env)
    assert wrong.exit_code == 2 and "nothing deleted" in wrong.output
    flag = runner.invoke(cli.app, ["tenant", "delete", "acme", "--confirm", "ACME"], env=env)
    assert flag.exit_code == 2
    typed = runner.invoke(cli.app, ["tenant", "delete", "acme"], input="acme\n", env=env)
    assert typed.exit_code == 0, typed.output
    assert '"tenant_id": "acme"' in typed.stdout
    listed = runner.invoke(cli.app, ["audit", "operator"], env=env)
    assert '"action": "tenant_delete"' in listed.stdout and '"target": "acme"' in listed.stdout
    again = runner.invoke(cli.app, ["tenant", "delete", "acme", "--confirm", "acme"], env=env)
    assert again.exit_code == 1 and "no tenant 'acme'" in again.output
