"""OpenLineage in: the endpoint openlineage-python's HTTP transport posts to by default."""

from fastapi import APIRouter, Request

from lineage.api.deps import AppSettings, Db, Ingest
from lineage.api.results import Json
from lineage.interop.openlineage import (
    RunEventRecorded,
    decode_body,
    parse_run_event,
    record_run_event,
)

router = APIRouter(prefix="/api/v1", tags=["openlineage"])


@router.post(
    "/lineage",
    response_model=RunEventRecorded,
    # Read by the route itself (maybe gzipped), so described here.
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "an OpenLineage RunEvent",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
)
async def post_lineage(
    request: Request, database: Db, caller: Ingest, settings: AppSettings
) -> Json:
    """Record one OpenLineage RunEvent (JSON, optionally `Content-Encoding: gzip`): each dataset
    becomes a record, outputs derived from inputs (see lineage/interop/openlineage.py). Replays
    record nothing new. Returns which record each dataset is."""
    body = decode_body(
        await request.body(), request.headers.get("content-encoding"), settings.max_body_bytes
    )
    event = parse_run_event(body)
    recorded = await record_run_event(database, caller.tenant_id, event)
    return Json(recorded.model_dump(mode="json"))
