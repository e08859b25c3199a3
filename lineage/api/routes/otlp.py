"""OTLP/HTTP in: `POST /v1/traces`, where an OpenTelemetry exporter or collector sends spans.
The spans are stored as `POST /v1/spans` stores them, and the lineage they describe is derived
from them in the same transaction (lineage.interop.otlp_lineage)."""

import json
from typing import Any

import asyncpg
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from lineage import db
from lineage.api import models
from lineage.api.deps import AppSettings, AppSigner, Ingest, Pool
from lineage.api.routes.spans import store_spans
from lineage.core.derive import derive_many
from lineage.core.errors import UnsupportedMediaType
from lineage.core.metrics import OTLP_UNKNOWN_IDS
from lineage.interop import otlp, otlp_lineage
from lineage.interop.openlineage import decode_body
from lineage.services.signing import Signer
from lineage.store.postgres import ConnectionStore

router = APIRouter(prefix="/v1/traces", tags=["traces"])


async def _stored_retrievals(
    connection: asyncpg.Connection, tenant_id: str, trace_ids: set[str]
) -> dict[str, list[tuple[str, int]]]:
    """Retrieval records made from earlier requests' spans of these traces, with their end."""
    found: dict[str, list[tuple[str, int]]] = {}
    for trace_id in trace_ids:
        for row in await db.fetch(
            connection, "trace_contexts", tenant_id=tenant_id, trace_id=trace_id
        ):
            ended = (row["attributes"] or {}).get("otel", {}).get("end_us")
            if row["kind"] == "retrieval" and isinstance(ended, int):
                found.setdefault(trace_id, []).append((row["context_id"], ended))
    return found


async def record_export(
    connection: asyncpg.Connection,
    tenant_id: str,
    spans: list[otlp.DecodedSpan],
    signer: Signer,
    max_spans_per_trace: int,
) -> dict[str, Any]:
    """Store the spans and derive their lineage, all in the caller's transaction."""
    readings = [otlp_lineage.read_span(decoded.span) for decoded in spans]
    resolved = await otlp_lineage.resolve(connection, tenant_id, readings)
    llm_traces = {r.span.trace_id for r in readings if r.role == "llm"}
    stored = await _stored_retrievals(connection, tenant_id, llm_traces)
    mapped = otlp_lineage.map_spans(readings, resolved, stored)
    to_store = []
    for reading in readings:
        attributes = otlp_lineage.hashed_text(reading.span.attributes)
        if listed := mapped.unknown.get(reading.span.span_id):
            attributes[otlp_lineage.LOCAL_ATTRIBUTE] = listed
        to_store.append(reading.span.model_copy(update={"attributes": attributes}))
    stored_spans = await store_spans(connection, tenant_id, to_store, max_spans_per_trace)
    made = await derive_many(ConnectionStore(connection, tenant_id, signer), mapped.derivations)
    unknown: list[dict[str, str]] = [
        {"span_id": span_id, "id": shown}
        for span_id, listed in mapped.unknown.items()
        for shown in listed
    ]
    OTLP_UNKNOWN_IDS.inc(len(unknown))
    report: dict[str, Any] = {
        "spans": len(spans),
        "stored": stored_spans,
        "records": [c.context_id for c in made],
        "unknown_ids": unknown,
    }
    return report


@router.post(
    "",
    responses={
        **models.OTLP_EXPORTED,
        400: {"description": "not an OTLP ExportTraceServiceRequest"},
        413: {"description": "too many spans, or a body past max_body_bytes"},
        415: {"description": "not protobuf or JSON, or an encoding other than gzip"},
    },
)
async def export_traces(
    request: Request, pool: Pool, caller: Ingest, settings: AppSettings, signer: AppSigner
) -> Response:
    """Take an OTLP ExportTraceServiceRequest (`application/x-protobuf` or `application/json`,
    optionally `Content-Encoding: gzip`). Spans are stored; retrieval and LLM spans become
    records (see the README's mapping table). Ids the tenant does not know are listed on their
    span, reported in `partial_success` and by `GET /v1/traces/{id}`, never made into records.
    A replayed export records nothing twice. All or nothing: a bad span refuses the request."""
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
    async with db.transaction(pool, caller.tenant_id) as connection:
        report = await record_export(
            connection, caller.tenant_id, spans, signer, settings.max_spans_per_trace
        )
    unknown_count = len(report["unknown_ids"])
    warning = (
        f"{unknown_count} ids are not known in this tenant (kept on their spans, no record made); "
        "GET /v1/traces/{trace_id} lists them"
        if unknown_count
        else None
    )
    content = otlp.export_response(kind, warning)
    if kind == otlp.JSON:  # curl users get the report too; exporters ignore the extra field
        return JSONResponse(json.loads(content) | {"lineage": report})
    return Response(content, media_type=otlp.PROTOBUF)
