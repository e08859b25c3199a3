"""OTLP intake: an export's spans stored as `POST /v1/spans` stores them, with the lineage they
describe (retrieval, rerank, embedding, prompt, answer and agent-step records:
lineage.interop.otlp_lineage) derived in the same transaction."""

from datetime import UTC, datetime, timedelta
from typing import Any

from lineage.core.derive import derive_many
from lineage.core.metrics import OTLP_UNKNOWN_IDS
from lineage.db.database import Database, Transaction
from lineage.interop import otlp, otlp_lineage, otlp_reading
from lineage.services.spans import SpanIn, store_spans
from lineage.services.transaction_store import TransactionStore

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


async def _earlier(tx: Transaction, trace_ids: set[str], max_spans: int) -> otlp_lineage.Earlier:
    """The spans earlier requests stored of these traces, and the records made from them."""
    earlier = otlp_lineage.Earlier()
    for trace_id in sorted(trace_ids):
        for row in await tx.fetch("trace_contexts", trace_id=trace_id):
            otel = (row["attributes"] or {}).get("otel", {})
            ended = otel.get("end_us")
            if isinstance(otel.get("span_id"), str):
                earlier.records.append(
                    otlp_lineage.Made(
                        row["context_id"],
                        row["kind"],
                        trace_id,
                        otel["span_id"],
                        ended if isinstance(ended, int) else None,
                    )
                )
        for row in await tx.fetch("trace_spans", trace_id=trace_id, max_spans=max_spans):
            stored = SpanIn.model_construct(
                trace_id=trace_id,
                span_id=row["span_id"],
                parent_span_id=row["parent_span_id"],
                name=row["name"],
                service_name=row["service_name"],
                start_time_unix_nano=_nanos(row["start_time"]),
                end_time_unix_nano=_nanos(row["end_time"]),
                attributes=row["attributes"] or {},
            )
            earlier.spans.append(otlp_reading.read_span(stored))
    return earlier


def _nanos(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1) * 1000


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
    # The traces whose answers and agent steps may derive from what earlier requests brought.
    continued = {r.span.trace_id for r in readings if r.role in ("llm", "agent")}
    earlier = await _earlier(tx, continued, max_spans_per_trace)
    mapped = otlp_lineage.map_spans(readings, resolved, earlier)
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
