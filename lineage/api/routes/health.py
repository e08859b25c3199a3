from typing import Any

from fastapi import APIRouter

from lineage.api import models
from lineage.api.deps import Db

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=models.Health)
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", response_model=models.Ready)
async def readyz(database: Db) -> dict[str, Any]:
    """The database answers, and which PostgreSQL it is."""
    return {"status": "ready", "postgres": await database.server_version()}
