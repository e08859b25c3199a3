from typing import Any

from fastapi import APIRouter

from lineage import walks
from lineage.api.deps import AppSettings, Pool, Read
from lineage.errors import NotFound

router = APIRouter(prefix="/v1/traces", tags=["traces"])


@router.get("/{trace_id}")
async def get_trace(
    trace_id: str, pool: Pool, caller: Read, settings: AppSettings
) -> dict[str, Any]:
    """Every record of one trace: the jump from a trace into the graph."""
    records = await walks.run(
        pool, settings, "trace_contexts", tenant_id=caller.tenant_id, trace_id=trace_id
    )
    if not records:
        raise NotFound(f"no records with trace_id {trace_id}")
    return {"trace_id": trace_id, "records": records}
