"""What the application role may do, tried as an SQL injection would: the service's pool logs
in as lineage_app (no SET ROLE to undo), a tenant it sets for itself is not vouched for and
reads nothing, and keys are made and revoked only through the definer functions, for the
vouched tenant only, never un-revoked."""

import asyncio

import asyncpg
import pytest

from lineage import db
from lineage.core.record import NewContext
from lineage.db.database import Database
from lineage.services import auth
from lineage.services.appends import append_records
from lineage.services.demo import load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.conftest import database_at


@pytest.fixture
async def two_tenants(database: Database, owner_database: Database) -> None:
    for tenant in ("acme", "rival"):
        assert await auth.create_tenant(owner_database, tenant)
    await load_incident(PostgresStore(database, "acme"))


async def test_the_pool_logs_in_as_the_application_role(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as connection:
        assert await connection.fetchval("SELECT session_user") == "lineage_app"
        await connection.execute("RESET ROLE")
        assert await connection.fetchval("SELECT current_user") == "lineage_app"
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await connection.execute("SET ROLE postgres")


async def test_a_tenant_set_by_an_injection_reads_nothing_foreign(
    pool: asyncpg.Pool, two_tenants: None
) -> None:
    async with db.transaction(pool, "acme") as connection:
        assert await connection.fetchval("SELECT count(*) FROM provenance") > 0
    # The rival's transaction, vouched for, is hijacked to name acme.
    for injected in (
        "SELECT set_config('lineage.tenant_id', 'acme', true)",
        "SET LOCAL lineage.tenant_id = 'acme'",
    ):
        async with pool.acquire() as connection, connection.transaction():
            await db.set_tenant(connection, "rival")
            await connection.execute(injected)
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="not vouched for"):
                await connection.fetchval("SELECT count(*) FROM provenance")
    # A session of its own that sets the tenant and borrows the rival's token.
    async with pool.acquire() as connection, connection.transaction():
        await db.set_tenant(connection, "rival")
        token = await connection.fetchval("SELECT current_setting('lineage.tenant_token')")
        await connection.execute("SELECT set_config('lineage.tenant_id', 'acme', true)")
        await connection.execute("SELECT set_config('lineage.tenant_token', $1, true)", token)
        for table in ("provenance", "api_keys", "tenant_settings", "audit_log"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="not vouched"):
                async with connection.transaction():
                    await connection.fetchval(f"SELECT count(*) FROM {table}")
    # Nor can it read the key the tokens are made with.
    async with pool.acquire() as connection:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await connection.fetchval("SELECT key FROM tenant_vouching_key")


async def test_a_revoked_key_cannot_be_unrevoked(
    pool: asyncpg.Pool, database: Database, two_tenants: None
) -> None:
    token, described = await auth.create_key(database, "acme", "admin", "to revoke")
    await auth.revoke_key(database, "acme", described["key_id"])
    async with db.transaction(pool, "acme") as connection:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await connection.execute(
                "UPDATE api_keys SET revoked_at = NULL WHERE key_id = $1", described["key_id"]
            )
    async with db.transaction(pool, "acme") as connection:
        [row] = await db.fetch(connection, "key_revoke", key_id=described["key_id"])
        first = row["revoked_at"]
    await auth.revoke_key(database, "acme", described["key_id"])
    async with db.transaction(pool, "acme") as connection:
        [row] = await db.fetch(connection, "key_revoke", key_id=described["key_id"])
        assert row["revoked_at"] == first
    assert await auth.authenticate(database, token) is None


async def test_no_key_can_be_minted_for_another_tenant(
    pool: asyncpg.Pool, two_tenants: None
) -> None:
    async with db.transaction(pool, "rival") as connection:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            async with connection.transaction():
                await connection.execute(
                    "INSERT INTO api_keys (key_id, tenant_id, scope, key_hash) "
                    "VALUES ('minted', 'acme', 'admin', '\\x00')"
                )
        # The definer function takes the transaction's vouched tenant, whatever it is told.
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="not vouched"):
            await as_acme_unvouched(
                connection, "key_create", key_id="minted", scope="admin", key_hash=b"\x00", label=""
            )
        [row] = await db.fetch(
            connection, "key_create", key_id="own", scope="admin", key_hash=b"\x00", label=""
        )
        assert row["tenant_id"] == "rival"
    async with db.transaction(pool, "acme") as connection:
        assert await connection.fetchval("SELECT count(*) FROM api_keys") == 0


async def as_acme_unvouched(connection: asyncpg.Connection, query: str, **values: object) -> None:
    async with connection.transaction():
        await connection.execute("SELECT set_config('lineage.tenant_id', 'acme', true)")
        await db.fetch(connection, query, **values)


async def test_a_rotated_vouching_key_ends_every_token_made_before(
    database_url: str, pool: asyncpg.Pool, owner_database: Database, two_tenants: None
) -> None:
    await auth.rotate_vouching_key(owner_database)
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="not vouched"):
        async with db.transaction(pool, "acme") as connection:
            await connection.fetchval("SELECT count(*) FROM provenance")
    fresh = await db.create_pool(database_url, max_size=1)
    try:
        async with db.transaction(fresh, "acme") as connection:
            assert await connection.fetchval("SELECT count(*) FROM provenance") > 0
    finally:
        await fresh.close()


async def test_the_cli_prints_the_token_that_vouches_for_a_tenant_in_psql(
    database_url: str, owner: asyncpg.Connection
) -> None:
    """`lineage tenant token` reads the owner's key through the command's Database."""
    from typer.testing import CliRunner

    from lineage.cli import app

    env = {"LINEAGE_DATABASE_URL": database_url}
    result = await asyncio.to_thread(CliRunner().invoke, app, ["tenant", "token", "acme"], env=env)
    assert result.exit_code == 0, result.output
    key = await db.fetch_vouching_key(owner)
    assert key is not None
    assert result.stdout.strip() == db.tenant_token(key, "acme")


async def test_no_session_reads_another_sessions_token_in_pg_stat_activity(
    pool: asyncpg.Pool, two_tenants: None
) -> None:
    # acme's request sits between its SET LOCAL of the tenant and its next statement.
    async with pool.acquire() as victim, victim.transaction():
        await db.set_tenant(victim, "acme")
        token = db.tenant_token(victim.vouching_key, "acme")
        async with pool.acquire() as injected:
            for query in (
                "SELECT string_agg(query, ' ') FROM pg_stat_activity",
                "SELECT string_agg(pg_stat_get_backend_activity(s), ' ') "
                "FROM pg_stat_get_backend_idset() AS s",
            ):
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    assert token not in (await injected.fetchval(query) or "")


async def test_row_security_vouches_for_the_tenant_once_a_statement(
    database_url: str, owner: asyncpg.Connection, settings: Settings
) -> None:
    """Every row a batch append inserts passes its table's policy; the vouching of the tenant
    (plpgsql, an HMAC) runs once a statement (an InitPlan), not once a row."""
    database_name = await owner.fetchval("SELECT current_database()")
    await owner.execute(f"ALTER DATABASE \"{database_name}\" SET track_functions = 'pl'")
    records = [
        NewContext(
            context_id=f"doc_{number}",
            kind="document",
            source_uri=f"s3://docs/{number}.md",
            content_hash=f"sha256:{number:064x}",
        )
        for number in range(200)
    ]
    async with database_at(database_url, settings) as database, database.tenant("default") as tx:
        await append_records(tx, records)
        calls = await tx.connection.fetchval(
            "SELECT calls FROM pg_stat_xact_user_functions "
            "WHERE funcname = 'lineage_session_tenant'"
        )
    assert 0 < calls < 50, f"lineage_session_tenant ran {calls} times for {len(records)} records"
