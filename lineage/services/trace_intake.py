"""OTLP intake: an export's spans stored as `POST /v1/spans` stores them, with the lineage they
describe (retrieval, prompt and answer records: lineage.interop.otlp_lineage) derived in the same
transaction."""

from typing import Any

from lineage.core.derive import derive_many
from lineage.core.metrics import OTLP_UNKNOWN_IDS
from lineage.db.database import Database, Transaction
from lineage.interop import otlp, otlp_lineage, otlp_reading
from lineage.services.spans import store_spans
from lineage.services.transaction_store import TransactionStore


async def _stored_retrievals(
    tx: Transaction, trace_ids: set[str]
) -> dict[str, list[tuple[str, int]]]:
    """Retrieval records made from earlier requests' spans of these traces, with their end."""
    found: dict[str, list[tuple[str, int]]] = {}
    for trace_id in trace_ids:
        for row in await tx.fetch("trace_contexts", trace_id=trace_id):
            ended = (row["attributes"] or {}).get("otel", {}).get("end_us")
            if row["kind"] == "retrieval" and isinstance(ended, int):
                found.setdefault(trace_id, []).append((row["context_id"], ended))
    return found


async def record_export(
    database: Database, tenant_id: str, spans: list[otlp.DecodedSpan], max_spans_per_trace: int
) -> dict[str, Any]:
    """Store the spans and derive their lineage, all in one tenant transaction."""
    async with database.tenant(tenant_id) as tx:
        return await _record_export(tx, spans, max_spans_per_trace)


async def _record_export(
    tx: Transaction, spans: list[otlp.DecodedSpan], max_spans_per_trace: int
) -> dict[str, Any]:
    readings = [otlp_reading.read_span(decoded.span) for decoded in spans]
    resolved = await otlp_lineage.resolve(tx, readings)
    llm_traces = {r.span.trace_id for r in readings if r.role == "llm"}
    stored = await _stored_retrievals(tx, llm_traces)
    mapped = otlp_lineage.map_spans(readings, resolved, stored)
    to_store = []
    for reading in readings:
        attributes = otlp_reading.hashed_text(reading.span.attributes)
        if listed := mapped.unknown.get(reading.span.span_id):
            attributes[otlp_reading.LOCAL_ATTRIBUTE] = listed
        to_store.append(reading.span.model_copy(update={"attributes": attributes}))
    stored_spans = await store_spans(tx, to_store, max_spans_per_trace)
    made = await derive_many(TransactionStore(tx), mapped.derivations)
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
