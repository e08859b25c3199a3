"""Connections: the asyncpg pool, the application role, and named queries run by name."""

import hashlib
import hmac
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from lineage.db.named_sql import QUERIES
from lineage.settings import Settings

APP_ROLE = "lineage_app"
# The tables partitioned by created_at as migrations 0016 and 0019 found them.
PARTITIONED_0016 = ("provenance", "record_signatures", "provenance_children", "root_sources")
# All of them now (migration 0034 added one, 0036 dropped root_sources and record_signatures),
# as lineage_partitioned_tables() lists them.
PARTITIONED = ("provenance", "provenance_children", "invalidation_postings")
# Row-level security policies compare tenant_id with this setting.
TENANT_SETTING = "lineage.tenant_id"
# ...which, as the application role, counts only with its HMAC under the owner's vouching key.
TENANT_TOKEN_SETTING = "lineage.tenant_token"

log = logging.getLogger(__name__)


def database_url(settings: Settings) -> str:
    """LINEAGE_DATABASE_URL when set, else the embedded server (started if need be)."""
    if settings.database_url:
        return settings.database_url
    from lineage.db.embedded import start_embedded

    return start_embedded(settings.data_dir)


# Whether the reads with a function of their own (migrations 0043-0045, 0052) may run as one
# call of it: not on Citus, whose workers learn a tenant only from SET LOCAL in a transaction
# block.
ONE_CALL_READS = """
SELECT to_regprocedure('public.lineage_walk_back(text, text, integer, text, jsonb)') IS NOT NULL
       AND to_regprocedure('public.lineage_get_contexts(text, text[], text, jsonb)') IS NOT NULL
       AND to_regprocedure('public.lineage_trace_contexts(text, text, text, jsonb)') IS NOT NULL
       AND to_regprocedure('public.lineage_blast_radius(integer, text[], text, text, text, '
                           'jsonb)') IS NOT NULL
       AND to_regprocedure('public.lineage_list_contexts(text, text, text, text, text, text, '
                           'timestamptz, timestamptz, timestamptz, text, bigint, text, jsonb)')
           IS NOT NULL
       AND NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')
"""


class TenantConnection(asyncpg.Connection):  # type: ignore[misc]
    """A connection that knows the key it vouches for its transactions' tenants with, and
    whether its reads may run as one call (ONE_CALL_READS)."""

    __slots__ = ("one_call_reads", "vouching_key")

    def get_reset_query(self) -> str:
        # Nothing to reset when the pool takes it back: every setting is SET LOCAL, no LISTEN,
        # cursor or advisory lock outlives its transaction (an open one is still rolled back),
        # and the pool's RESET ALL cost every request a round trip.
        return ""


async def fetch_vouching_key(connection: asyncpg.Connection) -> bytes | None:
    """The owner's tenant vouching key (migration 0013); None before that migration."""
    try:
        key = await connection.fetchval("SELECT key FROM tenant_vouching_key")
    except asyncpg.UndefinedTableError:
        return None
    return bytes(key) if key is not None else None


def tenant_token(key: bytes, tenant_id: str) -> str:
    """What lineage_tenant_vouched accepts for `tenant_id`: HMAC-SHA256 under the key, hex."""
    return hmac.new(key, tenant_id.encode(), hashlib.sha256).hexdigest()


async def _prepare_connection(connection: asyncpg.Connection) -> None:
    await _prepare_owner_connection(connection)
    connection.vouching_key = await fetch_vouching_key(connection)
    # The service works as the append-only role; where it could not be made, only the trigger
    # protects the table (see `lineage migrate`).
    if await connection.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", APP_ROLE):
        await connection.execute(f"SET ROLE {APP_ROLE}")


async def _prepare_owner_connection(connection: asyncpg.Connection) -> None:
    await connection.set_type_codec(
        "jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
    )
    connection.one_call_reads = await connection.fetchval(ONE_CALL_READS)


def jsonable(values: dict[str, Any]) -> dict[str, Any]:
    """A named query's values as a jsonb argument takes them: times as ISO 8601 text."""
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in values.items()}


def set_tenant_sql(tenant_id: str, vouching_key: bytes | None = None) -> str:
    """SET LOCAL of the tenant, the one form Citus passes on to the workers that run the
    transaction's queries, and only after citus.propagate_set_commands = 'local' (set per
    transaction: the pool's RESET ALL would undo a session setting; on plain PostgreSQL it is an
    unused placeholder). SET takes no bind parameter, so the id is quoted here as a string
    literal (standard_conforming_strings). With the vouching key, the tenant's token too (it
    is hex)."""
    if "\x00" in tenant_id:
        raise ValueError("a tenant id holds no NUL character")
    quoted = tenant_id.replace("'", "''")
    statements = [
        "SET LOCAL citus.propagate_set_commands = 'local'",
        f"SET LOCAL {TENANT_SETTING} = '{quoted}'",
    ]
    if vouching_key is not None:
        statements.append(
            f"SET LOCAL {TENANT_TOKEN_SETTING} = '{tenant_token(vouching_key, tenant_id)}'"
        )
    return "; ".join(statements)


async def set_tenant(connection: asyncpg.Connection, tenant_id: str) -> None:
    """Confine the connection's open transaction to the tenant, vouched for when the pool
    holds the key."""
    key = getattr(connection, "vouching_key", None)
    await connection.execute(set_tenant_sql(tenant_id, key))


def app_role_url(url: str) -> str:
    """The same server and database, logged in as the application role (its password, if it
    needs one, from ~/.pgpass or PGPASSFILE: never the owner's)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{APP_ROLE}@{host}"))


async def _app_role_can_log_in(url: str) -> bool:
    try:
        owner = await asyncpg.connect(url)
    except (OSError, asyncpg.PostgresError) as exc:
        # A pool may start while the server is down (the SDK spools): it connects later.
        log.warning(
            "cannot reach the database to check role %s (%s): working as it by SET ROLE "
            "from the URL's user once the database answers",
            APP_ROLE, exc,
        )  # fmt: skip
        return False
    try:
        user, exists = await owner.fetchrow(
            "SELECT current_user, to_regrole($1) IS NOT NULL", APP_ROLE
        )
    finally:
        await owner.close()
    if not exists:
        log.warning(
            "there is no role %s here: working as %s, which owns the tables, so only the "
            "append-only trigger refuses changes to records (`lineage migrate` says how to "
            "make the role)",
            APP_ROLE, user,
        )  # fmt: skip
        return False
    try:
        connection = await asyncpg.connect(app_role_url(url))
    except (OSError, asyncpg.PostgresError) as exc:
        log.warning(
            "cannot log in as %s (%s): working as it by SET ROLE from %s instead, which a "
            "RESET ROLE would undo and Citus refuses for writes; let %s log in: a password "
            "for it in ~/.pgpass or PGPASSFILE, or a pg_hba.conf rule",
            APP_ROLE, exc, user, APP_ROLE,
        )  # fmt: skip
        return False
    await connection.close()
    return True


async def create_pool(
    url: str, *, min_size: int = 1, max_size: int = 10, as_owner: bool = False
) -> asyncpg.Pool:
    """A pool logged in as the application role (so that no RESET ROLE gives a session the
    owner's rights back, and Citus opens its worker connections as it); `as_owner` keeps the
    connecting user, for the administration only the owner may do (creating tenants)."""
    if as_owner:
        init = _prepare_owner_vouching_connection
    elif await _app_role_can_log_in(url):
        key = await _owner_vouching_key(url)

        async def init(connection: asyncpg.Connection) -> None:
            await _prepare_owner_connection(connection)
            connection.vouching_key = key

        url = app_role_url(url)
    else:
        init = _prepare_connection
    pool: asyncpg.Pool = await asyncpg.create_pool(
        url, min_size=min_size, max_size=max_size, init=init, connection_class=TenantConnection
    )
    return pool


async def _prepare_owner_vouching_connection(connection: asyncpg.Connection) -> None:
    await _prepare_owner_connection(connection)
    connection.vouching_key = await fetch_vouching_key(connection)


async def _owner_vouching_key(url: str) -> bytes | None:
    """The vouching key, read as the user `url` names (the owner): the application role the
    pool then logs in as cannot read it."""
    connection = await asyncpg.connect(url)
    try:
        return await fetch_vouching_key(connection)
    except asyncpg.InsufficientPrivilegeError as exc:
        raise RuntimeError(
            "the tenant vouching key is the owner's: give the service the owner's database URL "
            "(it logs in as lineage_app for its queries)"
        ) from exc
    finally:
        await connection.close()


@asynccontextmanager
async def transaction(
    pool: asyncpg.Pool,
    tenant_id: str,
    *,
    statement_timeout_ms: int | None = None,
    generic_plans: bool = False,
) -> AsyncIterator[asyncpg.Connection]:
    """One transaction confined to one tenant.

    The tenant is set with SET LOCAL, local to the transaction, so a pooled connection never
    carries it into the next request; row-level security reads it (on Citus, on the workers
    too: see set_tenant_sql).
    Walks also set their timeout and turn JIT off for this transaction alone; with
    `generic_plans`, their statements are planned once per connection, not at each run, on
    plain PostgreSQL.
    """
    async with pool.acquire() as connection, connection.transaction():
        statements = set_tenant_sql(tenant_id, getattr(connection, "vouching_key", None))
        if statement_timeout_ms is not None:  # in the same round trip
            statements += (
                f"; SET LOCAL statement_timeout = {int(statement_timeout_ms)}; SET LOCAL jit = off"
            )
        # Where reads run as one call: Citus cannot plan the walks generically ("could not
        # create distributed plan").
        if generic_plans and getattr(connection, "one_call_reads", False):
            statements += "; SET LOCAL plan_cache_mode = force_generic_plan"
        await connection.execute(statements)
        yield connection


async def fetch(connection: asyncpg.Connection, name: str, **values: Any) -> list[asyncpg.Record]:
    query = QUERIES[name]
    rows: list[asyncpg.Record] = await connection.fetch(query.sql, *query.arguments(values))
    return rows


async def execute(connection: asyncpg.Connection, name: str, **values: Any) -> None:
    query = QUERIES[name]
    await connection.execute(query.sql, *query.arguments(values))
