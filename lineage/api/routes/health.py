from typing import Any

from fastapi import APIRouter

from lineage import db
from lineage.api import models
from lineage.api.deps import Pool

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=models.Health)
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", response_model=models.Ready)
async def readyz(pool: Pool) -> dict[str, Any]:
    """The database answers, and which PostgreSQL it is."""
    async with pool.acquire() as connection:
        [row] = await db.fetch(connection, "server_version")
    return {"status": "ready", "postgres": row["server_version_num"]}
