"""Administration for a tenant's admin keys: keys and the audit log."""

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict

from lineage.api import models
from lineage.api.deps import Admin, Db, IsoTime, ReadDb
from lineage.services import audit, auth

router = APIRouter(prefix="/v1", tags=["admin"])


class KeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scope: auth.Scope
    label: str | None = None


@router.post("/keys", status_code=201, response_model=models.KeyCreated)
async def create_key(body: KeyIn, database: Db, caller: Admin) -> dict[str, Any]:
    """A new key for the caller's tenant; `key` is shown in this response only."""
    token, row = await auth.create_key(database, caller.tenant_id, body.scope, body.label)
    return {"key": token, **row}


@router.get("/keys", response_model=models.Keys)
async def list_keys(database: ReadDb, caller: Admin) -> dict[str, Any]:
    return {"keys": await auth.list_keys(database, caller.tenant_id)}


@router.delete("/keys/{key_id}", status_code=204)
async def revoke_key(key_id: str, database: Db, caller: Admin) -> None:
    await auth.revoke_key(database, caller.tenant_id, key_id)


@router.get("/audit", response_model=models.AuditEntries)
async def audit_entries(
    database: ReadDb,
    caller: Admin,
    since: IsoTime = datetime(1970, 1, 1, tzinfo=UTC),
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> dict[str, Any]:
    """The tenant's audit records since a time, oldest first, a page at a time (follow
    `next`)."""
    return await audit.entries(database, caller.tenant_id, since, limit, cursor)
