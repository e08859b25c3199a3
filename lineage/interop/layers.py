"""Layered provenance from the stored spans: the request a record was made in, the service
call that made it, and the transport under that call, read at the time of asking from the
spans table (records stay append-only and small; a trace's entry span ends, and so arrives,
after the spans its records come from).

- **request**: the entry span of the record's trace (the topmost stored ancestor of the
  record's span, else the trace's earliest root): trace id, operation (its name), started and
  finished, and the caller (service name, session, user, HTTP route and method, when named);
- **service**: the span the record was made from (`attributes.otel.span_id`): operation,
  provider (else the first its transport spans name), model, effective parameters
  (`llm.invocation_parameters` overlaid with the GenAI `gen_ai.request.*` ones), attempts
  (how many transport spans it made), fingerprints of its input content and of its template
  variables (hashes, never text), prompt version;
- **transport**: each CLIENT span below the service span (or the service span itself when it
  is a CLIENT span with none below it): backend request id (`gen_ai.response.id`, else a
  request-id response header, else `aws.request_id`), retries (`http.request.resend_count`),
  HTTP status and the SDK (instrumentation scope) that sent it.

A field is null, a map empty, when no span says it: nothing is invented. docs/traces.md has
the attribute table.
"""

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from lineage.core.hashing import content_hash
from lineage.core.record import format_timestamp
from lineage.db.database import Transaction
from lineage.services.spans import spans_of_traces

__all__ = ["LayerSpan", "Traced", "request_layer", "request_layers"]

LayerSpan = dict[str, Any]  # a row of sql/layer_spans.sql
Traced = tuple[str, str | None, dict[str, Any]]  # a record's context_id, trace_id, attributes
PROVIDER_KEYS = ("gen_ai.provider.name", "llm.provider", "gen_ai.system", "llm.system")
MODEL_KEYS = (
    "gen_ai.response.model",
    "llm.model_name",
    "gen_ai.request.model",
    "embedding.model_name",
    "reranker.model_name",
)
INVOCATION_PARAMETERS = "llm.invocation_parameters"
# The model is the layer's `model`, not a parameter: OpenAI's name for it, and LlamaIndex's
# (its LLMMetadata is what OpenInference records as the invocation parameters).
MODEL_PARAMETERS = frozenset({"model", "model_name"})
REQUEST_PARAMETER = re.compile(r"^gen_ai\.request\.(?!model$)([a-z_.]+)$")
INPUT_KEYS = re.compile(
    r"^(input\.value|llm\.prompts|gen_ai\.input\.messages|gen_ai\.system_instructions"
    r"|gen_ai\.prompt|gen_ai\.retrieval\.query\.text|llm\.input_messages\.\d+\.message\.content"
    r"|embedding\.embeddings\.\d+\.embedding\.text)$"
)
TEMPLATE_VARIABLES = "llm.prompt_template.variables"
PROMPT_VERSION_KEYS = ("llm.prompt_template.version", "gen_ai.prompt.version")
REQUEST_ID_KEYS = (
    "gen_ai.response.id",
    "http.response.header.x-request-id",
    "http.response.header.request-id",
    "aws.request_id",
)
CALLER_KEYS = {
    "session_id": ("session.id", "gen_ai.conversation.id"),
    "user_id": ("user.id", "enduser.id"),
    "route": ("http.route",),
    "method": ("http.request.method", "http.method"),
}
HASHED = re.compile(r"^sha256:[0-9a-f]{64}$")
# Bounds on what one layer repeats from a span: a header stays a header.
MAX_PARAMETERS = 32
MAX_VALUE_CHARS = 256
MAX_KEY_CHARS = 64
MAX_LIST_ITEMS = 16
MAX_TRANSPORTS = 16


def _text(value: Any) -> str | None:
    if isinstance(value, list) and value:  # captured HTTP headers are lists of strings
        value = value[0]
    if isinstance(value, str) and 0 < len(value) <= MAX_VALUE_CHARS:
        return value
    return None


def _first(attributes: dict[str, Any], keys: Iterable[str]) -> str | None:
    return next((t for t in (_text(attributes.get(k)) for k in keys) if t), None)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _scalar(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) <= MAX_VALUE_CHARS
    return value is None or isinstance(value, bool | int | float)


def _parameter(value: Any) -> Any:
    """A parameter worth repeating: a scalar or a short list of them; else None."""
    if isinstance(value, list) and len(value) <= MAX_LIST_ITEMS and all(map(_scalar, value)):
        return value
    return value if _scalar(value) and value is not None else None


def parameters(attributes: dict[str, Any]) -> dict[str, Any]:
    """The effective parameters: OpenInference's invocation parameters, with the GenAI
    request attributes (the ones the call was made with) over them."""
    given: dict[str, Any] = {}
    invocation = attributes.get(INVOCATION_PARAMETERS)
    if isinstance(invocation, str):
        try:
            invocation = json.loads(invocation)
        except ValueError:
            invocation = None
    if isinstance(invocation, dict):
        given |= invocation
    for key, value in attributes.items():
        if match := REQUEST_PARAMETER.fullmatch(key):
            given[match[1]] = value
    kept = {
        k: _parameter(v)
        for k, v in given.items()
        if k not in MODEL_PARAMETERS and len(k) <= MAX_KEY_CHARS
    }
    return dict(sorted((k, v) for k, v in kept.items() if v is not None)[:MAX_PARAMETERS])


def _hash_of(value: Any) -> str:
    """A stored span's text is its hash already (otlp_reading.hashed_text); else hash it."""
    if isinstance(value, str) and HASHED.fullmatch(value):
        return value
    return content_hash(value if isinstance(value, str) else json.dumps(value, sort_keys=True))


def input_fingerprint(attributes: dict[str, Any]) -> str | None:
    """`sha256:` of the span's input attributes as sorted `key=hash` lines; None without any."""
    lines = sorted(
        f"{key}={_hash_of(value)}\n"
        for key, value in attributes.items()
        if INPUT_KEYS.fullmatch(key) and value not in (None, "")
    )
    return content_hash("".join(lines)) if lines else None


def _times(span: LayerSpan) -> dict[str, str]:
    return {
        "started_at": format_timestamp(span["start_time"]),
        "finished_at": format_timestamp(span["end_time"]),
    }


def _transport(span: LayerSpan) -> dict[str, Any]:
    attributes = span["attributes"] or {}
    scope, version = _text(attributes.get("otel.scope.name")), attributes.get("otel.scope.version")
    sdk = f"{scope}@{version}" if scope and _text(version) else scope
    return {
        "span_id": span["span_id"],
        "operation": span["name"],
        "request_id": _first(attributes, REQUEST_ID_KEYS),
        "retries": _count(attributes.get("http.request.resend_count")),
        "status_code": _count(attributes.get("http.response.status_code")),
        "sdk": sdk,
    }


def _below(span_id: str, children: dict[str, list[LayerSpan]]) -> list[LayerSpan]:
    """Every stored span below span_id, depth first, each once."""
    found: list[LayerSpan] = []
    seen = {span_id}
    frontier = list(children.get(span_id, []))
    while frontier:
        span = frontier.pop(0)
        if span["span_id"] not in seen:
            seen.add(span["span_id"])
            found.append(span)
            frontier += children.get(span["span_id"], [])
    return found


def _provider_below(clients: Sequence[LayerSpan]) -> str | None:
    """The provider the call's client spans name: a framework's LLM span (OpenInference names a
    provider for a few LLM classes only) over the GenAI client span of the SDK it called."""
    return next((p for c in clients if (p := _first(c["attributes"] or {}, PROVIDER_KEYS))), None)


def _service(span: LayerSpan, children: dict[str, list[LayerSpan]]) -> dict[str, Any]:
    attributes = span["attributes"] or {}
    clients = [s for s in _below(span["span_id"], children) if s["span_kind"] == "CLIENT"]
    if not clients and span["span_kind"] == "CLIENT":
        clients = [span]
    transports = [_transport(s) for s in clients[:MAX_TRANSPORTS]]
    variables = attributes.get(TEMPLATE_VARIABLES)
    return {
        "span_id": span["span_id"],
        "operation": _first(attributes, ("gen_ai.operation.name",)) or span["name"],
        "provider": _first(attributes, PROVIDER_KEYS) or _provider_below(clients),
        "model": _first(attributes, MODEL_KEYS),
        "parameters": parameters(attributes),
        "attempts": len(clients) or None,
        "input_fingerprint": input_fingerprint(attributes),
        "variables_fingerprint": _hash_of(variables) if variables not in (None, "") else None,
        "prompt_version": _first(attributes, PROMPT_VERSION_KEYS),
        **_times(span),
        "transport": transports,
    }


def _caller(span: LayerSpan) -> dict[str, str]:
    attributes = span["attributes"] or {}
    caller = {"service": span["service_name"]} if span["service_name"] else {}
    for name, keys in CALLER_KEYS.items():
        if found := _first(attributes, keys):
            caller[name] = found
    return caller


def _span_id(attributes: dict[str, Any]) -> str | None:
    """The span a record was made from, as the OTLP intake notes it."""
    otel = attributes.get("otel")
    span_id = otel.get("span_id") if isinstance(otel, dict) else None
    return span_id if isinstance(span_id, str) else None


def request_layer(
    trace_id: str | None, attributes: dict[str, Any], spans: Sequence[LayerSpan]
) -> dict[str, Any] | None:
    """A record's request layer, its service and transport layers nested in it, from the spans
    of its trace; None when the record has no trace or none of its spans is stored."""
    if trace_id is None or not spans:
        return None
    by_id = {s["span_id"]: s for s in spans}
    children: dict[str, list[LayerSpan]] = {}
    for span in spans:
        if span["parent_span_id"] in by_id:
            children.setdefault(span["parent_span_id"], []).append(span)
    made_by = by_id.get(_span_id(attributes) or "")
    entry = made_by
    seen: set[str] = set()
    while entry is not None and entry["parent_span_id"] in by_id and entry["span_id"] not in seen:
        seen.add(entry["span_id"])
        entry = by_id[entry["parent_span_id"]]
    if entry is None:
        roots = [s for s in spans if s["parent_span_id"] not in by_id]
        entry = min(roots or spans, key=lambda s: (s["start_time"], s["span_id"]))
    return {
        "trace_id": trace_id,
        "span_id": entry["span_id"],
        "operation": entry["name"],
        **_times(entry),
        "caller": _caller(entry),
        "service": _service(made_by, children) if made_by is not None else None,
    }


async def request_layers(
    tx: Transaction, records: Sequence[Traced], max_spans: int
) -> dict[str, dict[str, Any] | None]:
    """Each record's request layer (request_layer), the spans of all their traces read at once."""
    trace_ids = {trace for _, trace, _ in records if trace}
    span_ids = {span for _, _, attributes in records if (span := _span_id(attributes))}
    traces = await spans_of_traces(tx, trace_ids, span_ids, max_spans)
    return {
        context_id: request_layer(trace, attributes, traces.get(trace or "", []))
        for context_id, trace, attributes in records
    }
