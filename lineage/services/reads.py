"""Any named read of a tenant's records (a walk, a list, a trace), run under the read
settings: the statement timeout, and a WalkTimeout that says which setting to raise."""

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import asyncpg

from lineage import db
from lineage.core import DEFAULT_TENANT, metrics
from lineage.core.errors import WalkTimeout
from lineage.core.record import format_timestamp
from lineage.db.database import Database
from lineage.db.queries import QUERIES
from lineage.settings import Settings


def node_from_row(row: asyncpg.Record) -> dict[str, Any]:
    node = dict(row)
    for key, value in node.items():
        if isinstance(value, datetime):
            node[key] = format_timestamp(value)
        elif isinstance(value, tuple):
            node[key] = list(value)
    return node


def _timeout_message(name: str, settings: Settings) -> str:
    return (
        f"{name} ran past the {settings.statement_timeout_ms} ms statement timeout and has no "
        "complete answer; raise LINEAGE_STATEMENT_TIMEOUT_MS for this question"
    )


async def run(
    database: Database, settings: Settings, name: str, **values: Any
) -> list[dict[str, Any]]:
    """Run one named query under the walk settings (timeout, no JIT) and return its rows."""
    try:
        async with database.tenant(
            values.get("tenant_id", DEFAULT_TENANT),
            statement_timeout_ms=settings.statement_timeout_ms,
        ) as tx:
            with metrics.time_walk(name):
                rows = await db.fetch(tx.connection, name, **values)
    except asyncpg.QueryCanceledError as exc:
        raise WalkTimeout(_timeout_message(name, settings)) from exc
    return [node_from_row(row) for row in rows]


async def stream(
    database: Database, settings: Settings, name: str, **values: Any
) -> AsyncIterator[dict[str, Any]]:
    """The same, row by row through a server-side cursor, so memory stays bounded."""
    query = QUERIES[name]
    try:
        async with database.tenant(
            values.get("tenant_id", DEFAULT_TENANT),
            statement_timeout_ms=settings.statement_timeout_ms,
        ) as tx:
            async for row in tx.connection.cursor(
                query.sql, *query.arguments(values), prefetch=1000
            ):
                yield node_from_row(row)
    except asyncpg.QueryCanceledError as exc:
        raise WalkTimeout(_timeout_message(name, settings)) from exc
