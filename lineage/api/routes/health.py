from fastapi import APIRouter

from lineage.api.deps import Pool

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(pool: Pool) -> dict[str, str]:
    """The database answers."""
    async with pool.acquire() as connection:
        await connection.fetchval("SELECT 1")
    return {"status": "ready"}
