"""What each route answers, as pydantic models: the OpenAPI schema documents them and FastAPI
checks every JSON body a route returns against its model. They describe the bodies as they are
sent and never drop a key (extra keys pass through); errors are `Problem`s (problems.py). A
result a service returns as it is sent is declared once, by that service, on lineage.core.body's
`Body`: the route names it there (e.g. privacy.TenantSettings), and the models here use it."""

from datetime import datetime
from typing import Any

from pydantic import ConfigDict, Field, model_validator

from lineage.core.body import Body
from lineage.core.record import NewContext
from lineage.services.signing import SignatureCheck
from lineage.services.walks import ImpactSummary


class Problem(Body):
    """RFC 9457 problem details, sent as application/problem+json for every error."""

    type: str = Field(description="always about:blank")
    title: str = Field(description="the error class, e.g. NotFound, InvalidRecord")
    status: int
    detail: str = Field(description="what went wrong and what to fix")
    rule: str = Field(description="the rule broken, to branch on (lineage/core/errors.py)")
    trace_id: str | None = Field(default=None, description="find the request in the logs")


# --- records -----------------------------------------------------------------------------------


def _every_record_field_required(schema: dict[str, Any]) -> None:
    schema["required"] = list(dict.fromkeys([*NewContext.model_fields, *schema["required"]]))


class ListedRecord(Body, NewContext):
    """A record as reads list it (the tenant is the caller's)."""

    # Every field of the proposal, always sent, even those a proposal may leave out.
    model_config = ConfigDict(extra="allow", json_schema_extra=_every_record_field_required)

    created_at: str

    @model_validator(mode="before")
    @classmethod
    def _every_record_field(cls, data: Any) -> Any:
        if isinstance(data, dict) and (missing := NewContext.model_fields.keys() - data.keys()):
            raise ValueError(f"the record lacks {', '.join(sorted(missing))}")
        return data


class Record(ListedRecord):
    tenant_id: str


class CheckedRecord(Record):
    """A record with its signature check, when asked for (verify=true)."""

    signature: SignatureCheck | None = None


class SignedRecord(Record):
    signature: SignatureCheck


class Appended(Body):
    created: bool
    record: Record


class BatchAppended(Body):
    results: list[Appended]


class RecordPage(Body):
    records: list[ListedRecord]
    next: str | None = Field(description="the cursor of the next page; null on the last")


class WalkNode(ListedRecord):
    """A hop of a walk-back; with `layers=true` it also has `request`: the request it was made
    in, its `service` call and that call's `transport` nested (lineage/interop/layers.py), null
    when no span of its trace is stored."""

    depth: int = Field(description="hops from the start (0)")
    truncated: bool = Field(description="max_depth stopped the walk below this record")
    expired: bool = Field(
        default=False,
        description="the walk reached records the retention period dropped (or, for the "
        "questions that cannot see them, the tenant has such records)",
    )


class Edge(Body):
    parent: str
    child: str


class WalkBack(Body):
    context_id: str
    nodes: list[WalkNode]
    edges: list[Edge]
    truncated: bool
    truncated_reason: str | None = Field(
        default=None,
        description="max_depth, or retention when the walk reached a record the retention "
        "period dropped; null when complete",
    )


class Hop(Body):
    context_id: str
    kind: str
    depth: int
    reason: str
    detail: str | None


class SuspiciousHops(Body):
    context_id: str
    hops: list[Hop]


class Impact(Body):
    """The JSON answer; with `Accept: application/x-ndjson`, one node a line and then a line
    with the summary (or with `error` and the summary so far, when the walk failed midway)."""

    nodes: list[WalkNode]
    summary: ImpactSummary


class Layer(Body):
    depth: int
    counts_by_kind: dict[str, int]


class ImpactPage(Body):
    source_uri: str | None
    context_id: str | None
    kind: str
    summary: ImpactSummary
    layers: list[Layer]
    matching: int
    offset: int = Field(description="the records of `kind` before this page")
    nodes: list[WalkNode]
    next: str | None = Field(description="the cursor of the next page; null on the last")
    next_offset: int | None = Field(description="the next page's `offset`; null on the last")


# --- traces, spans and queries -----------------------------------------------------------------


class SpanNode(Body):
    span_id: str
    parent_span_id: str | None
    name: str
    span_kind: str
    service_name: str | None
    start_time: str
    end_time: str
    status_code: str
    status_message: str | None
    attributes: dict[str, Any]
    duration_ms: float
    children: list["SpanNode"]


class UnknownId(Body):
    span_id: str
    id: str


class TraceView(Body):
    trace_id: str
    records: list[ListedRecord]
    spans: list[SpanNode]
    spans_truncated: bool
    unknown_ids: list[UnknownId]


class SpansStored(Body):
    received: int
    stored: int


class QueryRecorded(Body):
    request_id: str
    trace_id: str | None
    created: bool
    records: dict[str, Record] = Field(description="query, retrieval and answer")
    unknown_ids: list[str]


class QueryTrace(Body):
    request_id: str
    trace_id: str | None
    records: list[SignedRecord]
    spans: list[SpanNode]
    spans_truncated: bool


# --- answers, claims and verdicts --------------------------------------------------------------


class Verification(Body):
    """An answer's or claim's `claims`, or a hand-off's `statements`, each with its verdict."""

    context_id: str
    judge: str
    judge_version: str
    counts: dict[str, int]
    failing: int
    claims: list[dict[str, Any]] | None = None
    statements: list[dict[str, Any]] | None = None


class VerdictHistoryEntry(Body):
    context_id: str
    subject_id: str
    check_kind: str = Field(description="claim or statement")
    statement: Any = Field(description="a hand-off statement's index; null for a claim")
    verdict: str | None
    reason: str | None
    judge: str | None
    judge_version: str | None
    created_at: str


class Verdicts(Body):
    context_id: str
    verdicts: list[dict[str, Any]] = Field(description="the current verdict per subject and judge")
    history: list[VerdictHistoryEntry] = Field(description="every verdict, newest first")


class ClaimsReport(Body):
    group_by: str
    bucket: str
    rows: list[dict[str, Any]]


class DriftReport(Body):
    bucket: str
    rows: list[dict[str, Any]]


# --- administration and privacy ----------------------------------------------------------------


class Key(Body):
    key_id: str
    scope: str
    label: str | None
    created_at: datetime
    revoked_at: datetime | None


class KeyCreated(Body):
    key: str = Field(description="shown in this response only")
    key_id: str
    tenant_id: str
    scope: str
    label: str | None
    created_at: datetime


class Keys(Body):
    keys: list[Key]


class AuditEntry(Body):
    audit_id: int
    at: datetime
    key_id: str | None
    action: str
    target: str | None
    detail: dict[str, Any] | None


class AuditEntries(Body):
    entries: list[AuditEntry]
    next: str | None = Field(description="the cursor of the next page; null on the last")


class Session(Body):
    tenant_id: str
    scope: str
    expires_in: int = Field(description="seconds")


# --- the verifiable log, exports, health -------------------------------------------------------


class LogKey(Body):
    key_name: str
    algorithm: str
    public_key: str
    verifier_key: str


class Checkpoint(Body):
    origin: str
    tree_size: int
    root_hash: str
    time: str
    note: str = Field(description="the signed text to save")
    queued: int = Field(
        description="records appended but not in this checkpoint yet: the service integrates "
        "them in the background, a bounded step at a time; a later checkpoint covers them"
    )


class Checkpoints(Body):
    checkpoints: list[str] = Field(description="signed checkpoint notes, oldest first")
    next: str | None = Field(description="the cursor of the next page; null on the last")


class InclusionProof(Body):
    context_id: str
    leaf_index: int
    tree_size: int
    leaf_hash: str
    proof: list[str]
    record: Record | None = Field(description="null when the record is gone from the store")
    expired: bool = Field(
        default=False,
        description="the record is gone as retention drops records; its leaf is still in the tree",
    )
    expired_before: datetime | None = Field(
        default=None,
        description="where the record is gone: the tenant's expiry horizon (retention dropped "
        "what was created before it); null where it never dropped any",
    )
    created_at: datetime | None = Field(
        default=None,
        description="where the record is gone: its created_at as its leaf kept it (null for "
        "leaves logged before migration 0023)",
    )


class ConsistencyProof(Body):
    first: int
    second: int
    proof: list[str]


class ProvenanceEnvelope(Body):
    provenance: dict[str, Any]


class Health(Body):
    status: str


class Ready(Body):
    status: str
    postgres: int = Field(description="server_version_num")


class FiledNode(Body):
    context_id: str
    kind: str
    depth: int
    truncated: bool


class ImpactFile(Body):
    """The JSON file of a blast radius's ids (format=json)."""

    start: dict[str, str]
    kind: str
    records: list[FiledNode]
    summary: ImpactSummary


class OtlpReport(Body):
    spans: int
    stored: int
    records: list[str] = Field(description="the records made from the spans")
    unknown_ids: list[UnknownId]


class OtlpExported(Body):
    """ExportTraceServiceResponse as JSON, with what lineage made of the spans."""

    partialSuccess: dict[str, Any] | None = None  # noqa: N815 (OTLP's own name)
    lineage: OtlpReport


# --- bodies that are not one JSON document: their media types ---------------------------------

NDJSON = "application/x-ndjson"
TEXT: dict[str, Any] = {"schema": {"type": "string"}}
REPLAY = "an identical replay: nothing new was written"
STREAMED_IMPACT: dict[int | str, dict[str, Any]] = {
    200: {
        "description": f"JSON, or with `Accept: {NDJSON}` one node a line and a summary line",
        "content": {NDJSON: TEXT},
    }
}
IMPACT_FILES: dict[int | str, dict[str, Any]] = {
    200: {
        "model": ImpactFile,
        "description": "a download: CSV (context_id, kind, depth, truncated) or JSON",
        "content": {"text/csv": TEXT},
    }
}
PROV_DOCUMENTS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "a W3C PROV document in the format asked for",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "application/ld+json": {"schema": {"type": "object"}},
            "text/provenance-notation": TEXT,
            "application/xml": TEXT,
        },
    }
}
FRONT_MATTER: dict[int | str, dict[str, Any]] = {
    200: {"description": "JSON, or YAML front-matter", "content": {"application/yaml": TEXT}}
}
EVENT_STREAM: dict[int | str, dict[str, Any]] = {
    200: {"description": "Server-Sent Events, until closed", "content": {"text/event-stream": TEXT}}
}
EXPOSITION: dict[int | str, dict[str, Any]] = {
    200: {"description": "the Prometheus text format", "content": {"text/plain": TEXT}}
}
OTLP_EXPORTED: dict[int | str, dict[str, Any]] = {
    200: {
        "model": OtlpExported,
        "description": "ExportTraceServiceResponse, in the encoding of the request",
        "content": {"application/x-protobuf": {"schema": {"type": "string", "format": "binary"}}},
    }
}
