"""Spans: finished OpenTelemetry spans in (interop.span_processor), a trace's span tree out."""

from fastapi import APIRouter

from lineage.api import models
from lineage.api.deps import AppSettings, Db, Ingest
from lineage.core.errors import InvalidRecord
from lineage.services.spans import SpansIn, record_spans

router = APIRouter(prefix="/v1/spans", tags=["spans"])


@router.post("", response_model=models.SpansStored)
async def append_spans(
    body: SpansIn, database: Db, caller: Ingest, settings: AppSettings
) -> dict[str, int]:
    """Store finished spans (a span sent twice is stored once); all or nothing, and none when
    a trace would hold more than max_spans_per_trace."""
    if len(body.spans) > settings.max_spans_per_request:
        raise InvalidRecord(
            "batch_too_large",
            f"{len(body.spans)} spans; send at most {settings.max_spans_per_request} per request",
        )
    stored = await record_spans(
        database, caller.tenant_id, body.spans, settings.max_spans_per_trace
    )
    return {"received": len(body.spans), "stored": stored}
