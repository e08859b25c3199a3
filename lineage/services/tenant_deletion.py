"""Tenant deletion: every row of one tenant, in every table, in one transaction, with a receipt
in the operator's audit trail (`operator_audit`), which outlives the tenant.

The deletion itself is `lineage_delete_tenant` (migration 0008), the one path past the
append-only triggers: it finds the tables in the catalog, so a table added later is covered.
Only the database owner may run it; the application role is refused here and by the database.
"""

from datetime import datetime
from typing import Any

import asyncpg

from lineage import db
from lineage.core.errors import Forbidden, NotFound
from lineage.core.record import check_id
from lineage.db.database import Database


async def delete_tenant(database: Database, tenant_id: str) -> dict[str, Any]:
    """Delete the tenant and everything it holds; the receipt (rows per table, last signed
    checkpoint, time), as written to operator_audit."""
    check_id(tenant_id, "tenant name")
    async with database.connection() as connection:
        if await connection.fetchval("SELECT current_user") == db.APP_ROLE:
            raise Forbidden(
                f"tenant deletion is the database owner's: {db.APP_ROLE} may not delete tenants"
            )
        try:
            async with connection.transaction():
                [row] = await db.fetch(connection, "tenant_delete", tenant_id=tenant_id)
        except asyncpg.NoDataFoundError as exc:
            raise NotFound(f"no tenant {tenant_id!r}") from exc
        except asyncpg.InsufficientPrivilegeError as exc:
            raise Forbidden(f"tenant deletion is the database owner's: {exc}") from exc
    receipt: dict[str, Any] = row["receipt"]
    return receipt


async def operator_entries(database: Database, since: datetime, limit: int) -> list[dict[str, Any]]:
    """The operator's audit trail, oldest first (the owner's alone)."""
    async with database.connection() as connection:
        rows = await db.fetch(connection, "operator_audit_list", since=since, limit=limit)
    return [dict(row) for row in rows]
