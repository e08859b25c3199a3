"""Audit: who (key id) walked, exported, verified or forgot what, and when; append-only."""

from datetime import datetime
from typing import Any

import asyncpg

from lineage import db
from lineage.services.auth import Caller


async def record(
    pool: asyncpg.Pool,
    caller: Caller,
    action: str,
    target: str | None,
    detail: dict[str, Any] | None = None,
) -> None:
    """Append one audit record in its own transaction, so a failed request is audited too."""
    async with db.transaction(pool, caller.tenant_id) as connection:
        await db.execute(
            connection,
            "audit_append",
            tenant_id=caller.tenant_id,
            key_id=caller.key_id or "",
            action=action,
            target=target or "",
            detail=detail or {},
        )


async def entries(
    pool: asyncpg.Pool, tenant_id: str, since: datetime, limit: int
) -> list[dict[str, Any]]:
    async with db.transaction(pool, tenant_id) as connection:
        rows = await db.fetch(
            connection, "audit_list", tenant_id=tenant_id, since=since, limit=limit
        )
    return [dict(row) for row in rows]
