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
from lineage.services import auth, spans
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


async def test_the_pool_takes_a_connection_back_without_a_reset_query(database_url: str) -> None:
    """Every setting a tenant transaction makes is SET LOCAL, so the pool sends no reset query
    (RESET ALL and the rest) on release: a session setting made by hand outlives the release."""
    pool = await db.create_pool(database_url, min_size=1, max_size=1)
    try:
        async with pool.acquire() as connection:
            await connection.execute("SET application_name = 'kept_past_release'")
        async with pool.acquire() as connection:
            assert await connection.fetchval("SHOW application_name") == "kept_past_release"
    finally:
        await pool.close()


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
    """A batch append vouches for its tenant (plpgsql, an HMAC) once a statement (the policies'
    InitPlan, lineage_append's own check), not once a row."""
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
            "WHERE funcname = 'lineage_tenant_vouched'"
        )
    assert 0 < calls < 50, f"lineage_tenant_vouched ran {calls} times for {len(records)} records"


# What an injection in a tenant's own transaction could do to keep records out of the log or
# sign them behind the service's back, before records and the log were written only through
# the owner's functions (lineage_append, lineage_log_lock, lineage_log_advance).
DIRECT_WRITES = {
    "dequeue a record before its leaf": "UPDATE log_heads SET events_logged = 1000",
    "rewind the log head": "UPDATE log_heads SET tree_size = 0",
    "make a log head": "INSERT INTO log_heads (tenant_id) VALUES ('acme')",
    "sign a stored record again": "UPDATE provenance SET key_id = 'forged', signature = '\\x00'",
    "store an unsigned record": (
        "INSERT INTO provenance (tenant_id, context_id, kind, source_uri, content_hash, "
        "created_at) VALUES ('acme', 'unsigned_doc', 'document', 's3://x', 'sha256:00', now())"
    ),
    "queue a record twice": (
        "INSERT INTO events (tenant_id, position, context_id) SELECT tenant_id, 1000, context_id "
        "FROM provenance LIMIT 1"
    ),
    "add a leaf": (
        "INSERT INTO log_leaves (tenant_id, leaf_index, context_id) VALUES ('acme', 999, 'x')"
    ),
    "add a tree node": (
        "INSERT INTO log_nodes (tenant_id, level, node_index, hash) "
        "VALUES ('acme', 0, 999, '\\x00')"
    ),
    "number a stream event": (
        "INSERT INTO events (tenant_id, position, context_id) VALUES ('acme', 999, 'x')"
    ),
}


@pytest.mark.parametrize("statement", DIRECT_WRITES.values(), ids=DIRECT_WRITES.keys())
async def test_records_and_the_log_are_written_only_through_the_owners_functions(
    pool: asyncpg.Pool, two_tenants: None, statement: str
) -> None:
    async with db.transaction(pool, "acme") as connection:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
            await connection.execute(statement)


async def test_a_log_step_takes_the_next_queued_records_in_order_at_the_heads_size(
    pool: asyncpg.Pool, two_tenants: None
) -> None:
    """The one write the role has on the log cannot skip a queued record, log one twice or
    out of order, or move the head."""
    async with db.transaction(pool, "acme") as connection:
        token = await connection.fetchval("SELECT current_setting('lineage.tenant_token')")
        [size] = await connection.fetchrow(
            "SELECT tree_size FROM lineage_log_lock('acme', $1)", token
        )
        queued = [
            row["context_id"]
            for row in await connection.fetch(
                "SELECT context_id FROM events WHERE position > "
                "(SELECT events_logged FROM log_heads) ORDER BY position LIMIT 2"
            )
        ]
        assert len(queued) == 2
        step = "SELECT lineage_log_advance('acme', $1, $2, $3, $4, $5, $6, $7, '\\x00')"

        def leaves(count: int, first: int = size) -> list[object]:
            """Each leaf's hash (level 0), as every step must give."""
            return [[0] * count, list(range(first, first + count)), [bytes(32)] * count]

        wrongs = (
            [queued[0], "never_queued"],
            [queued[0], queued[0]],
            [queued[1], queued[0]],
            queued[1:],  # the first left out
        )
        for wrong in wrongs:
            with pytest.raises(asyncpg.SerializationError, match="next ones queued"):
                async with connection.transaction():
                    await connection.fetchval(
                        step, token, size, wrong, [None] * len(wrong), *leaves(len(wrong))
                    )
        with pytest.raises(asyncpg.SerializationError, match="at size"):
            async with connection.transaction():
                await connection.fetchval(step, token, size + 5, queued[:1], [None], *leaves(1))
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="not vouched"):
            async with connection.transaction():
                await connection.fetchval(step, "forged", size, queued[:1], [None], *leaves(1))
        misplaced = leaves(1, size + 1)  # no hash at the new leaf's index
        with pytest.raises(asyncpg.InvalidParameterValueError, match="needs its hash"):
            async with connection.transaction():
                await connection.fetchval(step, token, size, queued[:1], [None], *misplaced)
        one = await connection.fetchval(step, token, size, queued[:1], [None], *leaves(1))
        assert one == size + 1
        [following] = await db.fetch(
            connection, "log_queued_records", tenant_id="acme", batch_size=1
        )
        assert following["context_id"] == queued[1]  # the next step's first


async def test_no_tenant_can_hold_another_tenants_span_intake_lock(
    pool: asyncpg.Pool, database: Database, two_tenants: None
) -> None:
    """The span-append lock of a trace is keyed by the tenant's token, which no other tenant's
    session knows: rival holding what acme's key was (tenant and trace, both guessable) keeps
    acme's spans out no longer."""
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    span = spans.SpanIn(
        trace_id=trace, span_id="00f067aa0ba902b7", name="retrieve",
        start_time_unix_nano=1, end_time_unix_nano=2,
    )  # fmt: skip
    async with db.transaction(pool, "rival") as rival:
        await rival.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('acme/' || $1, 0))", trace
        )
        stored = await asyncio.wait_for(spans.record_spans(database, "acme", [span], 100), 10)
    assert stored == 1


async def test_a_listen_reads_no_tenants_name_and_no_revoked_key(
    database_url: str, database: Database, two_tenants: None
) -> None:
    """Any role may LISTEN: what an injection hears on the service's channels names no tenant
    and no key."""
    await hears_no_tenant_and_no_key(database_url, database, "heard_doc")


async def hears_no_tenant_and_no_key(url: str, database: Database, context_id: str) -> None:
    """An app-role LISTEN at `url` while acme appends `context_id` and revokes a new key: it
    hears one event and one key change, and neither names acme or the key."""
    heard: list[str] = []
    injected = await asyncpg.connect(db.app_role_url(url))
    try:
        for channel in ("lineage_events", "lineage_keys"):
            await injected.add_listener(channel, lambda *args: heard.append(f"{args[2]}:{args[3]}"))
        await append_records_as(database, "acme", context_id)
        _, key = await auth.create_key(database, "acme", "read")
        await auth.revoke_key(database, "acme", key["key_id"])
        for _ in range(100):
            if len(heard) >= 2:
                break
            await asyncio.sleep(0.05)
    finally:
        await injected.close()
    assert [line.split(":")[0] for line in heard] == ["lineage_events", "lineage_keys"], heard
    assert not [line for line in heard if "acme" in line or key["key_id"] in line], heard


async def append_records_as(database: Database, tenant: str, context_id: str) -> None:
    async with database.tenant(tenant) as tx:
        await append_records(
            tx,
            [
                NewContext(
                    context_id=context_id,
                    kind="document",
                    source_uri="s3://heard.md",
                    content_hash="sha256:" + "3" * 64,
                )
            ],
        )
