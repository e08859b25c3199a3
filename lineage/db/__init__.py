"""Connections: the asyncpg pool, the application role, and named queries run by name."""

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from lineage.db.queries import QUERIES
from lineage.settings import Settings

APP_ROLE = "lineage_app"
# Row-level security policies compare tenant_id with this setting.
TENANT_SETTING = "lineage.tenant_id"


def database_url(settings: Settings) -> str:
    """LINEAGE_DATABASE_URL when set, else the embedded server (started if need be)."""
    if settings.database_url:
        return settings.database_url
    from lineage.db.embedded import start_embedded

    return start_embedded(settings.data_dir)


async def _prepare_connection(connection: asyncpg.Connection) -> None:
    await _prepare_owner_connection(connection)
    # The service works as the append-only role; where it could not be made, only the trigger
    # protects the table (see `lineage migrate`).
    if await connection.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", APP_ROLE):
        await connection.execute(f"SET ROLE {APP_ROLE}")


async def _prepare_owner_connection(connection: asyncpg.Connection) -> None:
    await connection.set_type_codec(
        "jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
    )


async def create_pool(
    url: str, *, min_size: int = 1, max_size: int = 10, as_owner: bool = False
) -> asyncpg.Pool:
    """A pool acting as the application role; `as_owner` keeps the connecting user, for the
    administration only the owner may do (creating tenants)."""
    pool: asyncpg.Pool = await asyncpg.create_pool(
        url,
        min_size=min_size,
        max_size=max_size,
        init=_prepare_owner_connection if as_owner else _prepare_connection,
    )
    return pool


@asynccontextmanager
async def transaction(
    pool: asyncpg.Pool, tenant_id: str, *, statement_timeout_ms: int | None = None
) -> AsyncIterator[asyncpg.Connection]:
    """One transaction confined to one tenant.

    The tenant is set with set_config(..., true), local to the transaction, so a pooled
    connection never carries it into the next request; row-level security reads it.
    Walks also set their timeout and turn JIT off for this transaction alone.
    """
    async with pool.acquire() as connection, connection.transaction():
        await connection.execute(f"SELECT set_config('{TENANT_SETTING}', $1, true)", tenant_id)
        if statement_timeout_ms is not None:
            await connection.execute(
                "SELECT set_config('statement_timeout', $1, true), set_config('jit', 'off', true)",
                str(statement_timeout_ms),
            )
        yield connection


async def fetch(connection: asyncpg.Connection, name: str, **values: Any) -> list[asyncpg.Record]:
    query = QUERIES[name]
    rows: list[asyncpg.Record] = await connection.fetch(query.sql, *query.arguments(values))
    return rows


async def execute(connection: asyncpg.Connection, name: str, **values: Any) -> None:
    query = QUERIES[name]
    await connection.execute(query.sql, *query.arguments(values))
