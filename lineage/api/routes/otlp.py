"""OTLP/HTTP in: `POST /v1/traces`, where an OpenTelemetry exporter or collector sends spans.
The spans are stored as `POST /v1/spans` stores them, and the lineage they describe is derived
from them in the same transaction (lineage.interop.otlp_lineage)."""

import json

from fastapi import APIRouter, Request
from fastapi.responses import Response

from lineage.api import models
from lineage.api.deps import AppSettings, Db, Ingest
from lineage.api.results import Json
from lineage.core.errors import UnsupportedMediaType
from lineage.interop import otlp
from lineage.interop.openlineage import decode_body
from lineage.services.trace_intake import record_export

router = APIRouter(prefix="/v1/traces", tags=["traces"])


@router.post(
    "",
    responses={
        **models.OTLP_EXPORTED,
        400: {"description": "not an OTLP ExportTraceServiceRequest"},
        413: {"description": "too many spans, or a body past max_body_bytes"},
        415: {"description": "not protobuf or JSON, or an encoding other than gzip"},
    },
    # Read by the route itself (protobuf or JSON, maybe gzipped), so described here.
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "an OTLP ExportTraceServiceRequest",
            "content": {
                "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                "application/json": {"schema": {"type": "object"}},
            },
        }
    },
)
async def export_traces(
    request: Request, database: Db, caller: Ingest, settings: AppSettings
) -> Response:
    """Take an OTLP ExportTraceServiceRequest (`application/x-protobuf` or `application/json`,
    optionally `Content-Encoding: gzip`). Spans are stored; retrieval and LLM spans become
    records (see the mapping table in docs/traces.md). Ids the tenant does not know are listed
    on their span, reported in `partial_success` and by `GET /v1/traces/{id}`, never made into
    records. A replayed export records nothing twice. All or nothing: a bad span refuses the
    request."""
    kind = otlp.media_type(request.headers.get("content-type"))
    if kind is None:
        raise UnsupportedMediaType(
            f"Content-Type {request.headers.get('content-type')!r}: send {otlp.PROTOBUF} or "
            f"{otlp.JSON}"
        )
    body = decode_body(
        await request.body(), request.headers.get("content-encoding"), settings.max_body_bytes
    )
    spans = otlp.decode_spans(body, kind, settings.max_spans_per_request)
    report = await record_export(database, caller.tenant_id, spans, settings.max_spans_per_trace)
    unknown_count = len(report["unknown_ids"])
    warning = (
        f"{unknown_count} ids are not known in this tenant (kept on their spans, no record made); "
        "GET /v1/traces/{trace_id} lists them"
        if unknown_count
        else None
    )
    content = otlp.export_response(kind, warning)
    if kind == otlp.JSON:  # curl users get the report too; exporters ignore the extra field
        return Json(json.loads(content) | {"lineage": report})
    return Response(content, media_type=otlp.PROTOBUF)
