"""OpenLineage in: the endpoint openlineage-python's HTTP transport posts to by default."""

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from lineage import db
from lineage.api import models
from lineage.api.deps import AppSettings, AppSigner, Ingest, Pool
from lineage.interop.openlineage import decode_body, parse_run_event, record_run_event

router = APIRouter(prefix="/api/v1", tags=["openlineage"])


@router.post("/lineage", response_model=models.RunEventRecorded)
async def post_lineage(
    request: Request, pool: Pool, caller: Ingest, settings: AppSettings, signer: AppSigner
) -> JSONResponse:
    """Record one OpenLineage RunEvent (JSON, optionally `Content-Encoding: gzip`): each dataset
    becomes a record, outputs derived from inputs (see lineage/interop/openlineage.py). Replays
    record nothing new. Returns which record each dataset is."""
    body = decode_body(
        await request.body(), request.headers.get("content-encoding"), settings.max_body_bytes
    )
    event = parse_run_event(body)
    async with db.transaction(pool, caller.tenant_id) as connection:
        recorded = await record_run_event(connection, caller.tenant_id, event, signer)
    return JSONResponse(recorded.as_dict())
