"""What a route may ask for: the pool, the settings, the caller's tenant."""

from typing import Annotated

import asyncpg
from fastapi import Depends, Request

from lineage.settings import Settings


def get_pool(request: Request) -> asyncpg.Pool:
    pool: asyncpg.Pool = request.app.state.pool
    return pool


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_tenant(request: Request) -> str:
    # One tenant until scoped keys arrive; every query already takes it.
    return "default"


Pool = Annotated[asyncpg.Pool, Depends(get_pool)]
AppSettings = Annotated[Settings, Depends(get_settings)]
Tenant = Annotated[str, Depends(get_tenant)]
