from typing import Any

from fastapi import APIRouter

from lineage.api import models
from lineage.api.deps import AppSettings, Read, ReadDb
from lineage.core.errors import NotFound
from lineage.interop.otlp_reading import LOCAL_ATTRIBUTE
from lineage.services import reads
from lineage.services.spans import span_tree

router = APIRouter(prefix="/v1/traces", tags=["traces"])


@router.get("/{trace_id}", response_model=models.TraceView)
async def get_trace(
    trace_id: str, database: ReadDb, caller: Read, settings: AppSettings
) -> dict[str, Any]:
    """Every record of one trace with its span tree: the jump from a trace into the graph."""
    records = await reads.trace_records(database, settings, caller.tenant_id, trace_id)
    spans, spans_truncated = await span_tree(database, settings, caller.tenant_id, trace_id)
    if not records and not spans:
        raise NotFound(f"no records or spans with trace_id {trace_id}")
    return {
        "trace_id": trace_id,
        "records": records,
        "spans": spans,
        "spans_truncated": spans_truncated,
        "unknown_ids": _unknown_ids(spans),
    }


def _unknown_ids(spans: list[dict[str, Any]]) -> list[dict[str, str]]:
    """What the trace's spans named that no record stood for when they came in (OTLP intake)."""
    found: list[dict[str, str]] = []
    pending = list(spans)
    while pending:
        span = pending.pop()
        pending += span["children"]
        for shown in (span.get("attributes") or {}).get(LOCAL_ATTRIBUTE, []):
            found.append({"span_id": span["span_id"], "id": shown})
    return sorted(found, key=lambda item: (item["span_id"], item["id"]))
