"""Spans: finished OpenTelemetry spans stored per tenant (a trace bounded by
max_spans_per_trace where it is stored, not only where it is read), and a trace's span tree
read back."""

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import asyncpg
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lineage.core import metrics
from lineage.core.errors import InvalidRecord
from lineage.core.telemetry import TRACE_ID
from lineage.db.database import Database, Transaction
from lineage.services import reads
from lineage.settings import Settings

SPAN_ID = re.compile(r"^(?!0{16})[0-9a-f]{16}$")
MAX_SPAN_ATTRIBUTES_BYTES = 64 * 1024
# OTLP's times are 64-bit nanoseconds; beyond int64 (the year 2262) no clock writes them.
MAX_UNIX_NANO = 2**63 - 1


class SpanIn(BaseModel):
    """One finished span, as lineage.interop.span_processor.span_payload() writes it."""

    model_config = ConfigDict(extra="forbid")

    trace_id: str
    span_id: str
    parent_span_id: str | None = None
    name: str = Field(min_length=1, max_length=1024)
    kind: Literal["INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"] = "INTERNAL"
    service_name: str | None = Field(default=None, max_length=1024)
    start_time_unix_nano: int = Field(ge=0, le=MAX_UNIX_NANO)
    end_time_unix_nano: int = Field(ge=0, le=MAX_UNIX_NANO)
    status_code: Literal["UNSET", "OK", "ERROR"] = "UNSET"
    status_message: str | None = Field(default=None, max_length=4096)
    attributes: dict[str, Any] = Field(default_factory=dict)

    @field_validator("trace_id")
    @classmethod
    def w3c_trace_id(cls, trace_id: str) -> str:
        if not TRACE_ID.fullmatch(trace_id):
            raise ValueError("a W3C trace id is 32 lowercase hex digits, not all zero")
        return trace_id

    @field_validator("span_id", "parent_span_id")
    @classmethod
    def w3c_span_id(cls, span_id: str | None) -> str | None:
        if span_id is not None and not SPAN_ID.fullmatch(span_id):
            raise ValueError("a W3C span id is 16 lowercase hex digits, not all zero")
        return span_id

    @field_validator("attributes")
    @classmethod
    def bounded_attributes(cls, attributes: dict[str, Any]) -> dict[str, Any]:
        size = len(json.dumps(attributes))
        if size > MAX_SPAN_ATTRIBUTES_BYTES:
            raise ValueError(
                f"attributes are {size} bytes of JSON; at most {MAX_SPAN_ATTRIBUTES_BYTES}"
            )
        return attributes

    @model_validator(mode="after")
    def well_formed_tree_node(self) -> "SpanIn":
        if self.end_time_unix_nano < self.start_time_unix_nano:
            raise ValueError("end_time_unix_nano is before start_time_unix_nano")
        if self.parent_span_id == self.span_id:
            raise ValueError("a span cannot be its own parent")
        return self


class SpansIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    spans: list[SpanIn]


def _time(unix_nano: int) -> datetime:
    # Whole seconds and microseconds apart: a float of nanoseconds would round them.
    seconds, nanos = divmod(unix_nano, 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=nanos // 1000)


async def record_spans(
    database: Database, tenant_id: str, spans: Sequence[SpanIn], max_spans_per_trace: int
) -> int:
    """store_spans in one tenant transaction of its own (the API's verb)."""
    async with database.tenant(tenant_id) as tx:
        return await store_spans(tx, spans, max_spans_per_trace)


async def store_spans(
    tx: Transaction,
    spans: Sequence[SpanIn],
    max_spans_per_trace: int,
) -> int:
    """Store spans in the caller's transaction; a span already stored is left alone. Returns
    how many were new. Raises (so the caller's transaction stores nothing) when a trace would
    hold more than max_spans_per_trace: the limit holds where spans are stored."""
    trace_ids = sorted({s.trace_id for s in spans})
    await tx.fetch("trace_span_lock", trace_ids=trace_ids)
    stored = await tx.fetch(
        "append_spans",
        span_trace_ids=[s.trace_id for s in spans],
        span_ids=[s.span_id for s in spans],
        parent_span_ids=[s.parent_span_id for s in spans],
        span_names=[s.name for s in spans],
        span_kinds=[s.kind for s in spans],
        service_names=[s.service_name for s in spans],
        start_times=[_time(s.start_time_unix_nano) for s in spans],
        end_times=[_time(s.end_time_unix_nano) for s in spans],
        status_codes=[s.status_code for s in spans],
        status_messages=[s.status_message for s in spans],
        attribute_docs=[json.dumps(s.attributes) for s in spans],
    )
    over = await tx.fetch(
        "trace_spans_over_limit",
        trace_ids=trace_ids,
        max_spans=max_spans_per_trace,
    )
    if over:
        raise InvalidRecord(
            "trace_too_large",
            f"trace {over[0]['trace_id']} would hold {over[0]['stored']} spans; at most "
            f"{max_spans_per_trace} per trace (LINEAGE_MAX_SPANS_PER_TRACE): nothing of this "
            "request was stored",
        )
    metrics.SPANS_STORED.inc(len(stored))
    return len(stored)


def _span_node(row: asyncpg.Record) -> dict[str, Any]:
    duration = row["end_time"] - row["start_time"]
    node = reads.node_from_row(row)
    return node | {"duration_ms": duration / timedelta(milliseconds=1), "children": []}


async def span_tree(
    database: Database, settings: Settings, tenant_id: str, trace_id: str
) -> tuple[list[dict[str, Any]], bool]:
    """The trace's spans as a tree (roots, each with `children`, earliest first); a span whose
    parent was never received is a root. Also whether max_spans_per_trace cut the trace short."""
    async with database.tenant(tenant_id) as tx:
        rows = await tx.fetch(
            "trace_spans",
            trace_id=trace_id,
            max_spans=settings.max_spans_per_trace,
        )
    nodes = {row["span_id"]: _span_node(row) for row in rows}
    roots: list[dict[str, Any]] = []
    for node in nodes.values():
        parent = nodes.get(node["parent_span_id"] or "")
        (parent["children"] if parent is not None else roots).append(node)
    return roots, len(rows) >= settings.max_spans_per_trace


async def spans_of_traces(
    tx: Transaction, trace_ids: set[str], span_ids: set[str], max_spans: int
) -> dict[str, list[dict[str, Any]]]:
    """The stored spans of each trace (at most max_spans of each, earliest first), in one read:
    what records' provenance layers are made of (lineage.interop.layers). Attributes come only
    with the records' own spans (span_ids), CLIENT and SERVER spans, and spans with no stored
    parent; the others' are None."""
    if not trace_ids:
        return {}
    rows = await tx.fetch(
        "layer_spans", trace_ids=sorted(trace_ids), span_ids=sorted(span_ids), max_spans=max_spans
    )
    traces: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        traces.setdefault(row["trace_id"], []).append(dict(row))
    return traces
