"""One trace id per operation, shared with OpenTelemetry when it is installed.

`trace_context()` fixes the trace id once at an entry point; every `derive()` below it records
that id, `HttpStore` sends it (`traceparent`, `X-Trace-Id`), and the service's log lines carry
it. With OpenTelemetry installed (the `otel` extra), the current span's trace id serves when no
`trace_context()` is open, and `derive()` notes on the current span which ids it consumed and
produced. Without it, all of this still works on the context variable alone.
"""

import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from lineage.core.errors import BadParameter
from lineage.core.record import SAFE_TRACE_ID, SAFE_TRACE_ID_RULE, ContextRecord

try:
    from opentelemetry import trace as otel_trace
except ImportError:  # the otel extra is optional
    otel_trace = None  # type: ignore[assignment]

CONSUMED_ATTRIBUTE = "ctx.consumed_ids"
PRODUCED_ATTRIBUTE = "ctx.produced_ids"
MAX_SCOPE_CHARS = 256

TRACE_ID = re.compile(r"^(?!0{32})[0-9a-f]{32}$")
# W3C Trace Context, version 00: version-trace_id-parent_id-flags.
TRACEPARENT = re.compile(r"^00-(?P<trace_id>[0-9a-f]{32})-(?P<span_id>[0-9a-f]{16})-[0-9a-f]{2}$")


def scope_attributes(name: str | None, version: str | None) -> dict[str, str]:
    """A span's instrumentation scope (the library that made it) as the attributes OpenTelemetry
    names for formats without scopes: `otel.scope.name`, `otel.scope.version`."""
    named = {"otel.scope.name": name, "otel.scope.version": version}
    return {key: value for key, value in named.items() if value and len(value) <= MAX_SCOPE_CHARS}


_current: ContextVar[str | None] = ContextVar("lineage_trace_id", default=None)


def _span_context() -> Any | None:
    """The current OpenTelemetry span's context, when there is a valid one."""
    if otel_trace is None:
        return None
    span_context = otel_trace.get_current_span().get_span_context()
    return span_context if span_context.is_valid else None


def current_trace_id() -> str | None:
    """The open trace_context()'s id, else the current span's (W3C hex), else None."""
    trace_id = _current.get()
    if trace_id is not None:
        return trace_id
    span_context = _span_context()
    return format(span_context.trace_id, "032x") if span_context is not None else None


def new_trace_id() -> str:
    return secrets.token_hex(16)


@contextmanager
def trace_context(trace_id: str | None = None) -> Iterator[str]:
    """Fix the trace id for everything inside; yields it.

    Without an argument it keeps the id already current (an enclosing trace_context or span),
    and only an entry point with neither makes a new one.
    """
    if trace_id is not None:
        trace_id = checked_trace_id(trace_id)
    chosen = trace_id or current_trace_id() or new_trace_id()
    token = _current.set(chosen)
    try:
        yield chosen
    finally:
        _current.reset(token)


def normal_trace_id(trace_id: str) -> str | None:
    """The id in its stored form (a W3C id in lowercase), or None when it is not a safe id."""
    if not SAFE_TRACE_ID.fullmatch(trace_id) or re.fullmatch(r"0{32}", trace_id):
        return None
    lowered = trace_id.lower()
    return lowered if TRACE_ID.fullmatch(lowered) else trace_id


def checked_trace_id(trace_id: str) -> str:
    """normal_trace_id(), raising BadParameter naming the rule."""
    normal = normal_trace_id(trace_id)
    if normal is None:
        raise BadParameter(f"trace id {trace_id[:140]!r} is not accepted: {SAFE_TRACE_ID_RULE}")
    return normal


def trace_id_from_headers(headers: Mapping[str, str]) -> str | None:
    """The trace id a caller sent: W3C `traceparent` first, else `X-Trace-Id` (a W3C or other
    safe id); None if neither is well formed."""
    match = TRACEPARENT.fullmatch(headers.get("traceparent", "").strip().lower())
    if match and TRACE_ID.fullmatch(match["trace_id"]):
        return match["trace_id"]
    return normal_trace_id(headers.get("x-trace-id", "").strip())


def outgoing_headers() -> dict[str, str]:
    """Headers that carry the current trace id to the service; none outside any trace."""
    trace_id = current_trace_id()
    if trace_id is None:
        return {}
    if not TRACE_ID.fullmatch(trace_id):  # traceparent carries W3C ids only
        return {"X-Trace-Id": trace_id}
    span_context = _span_context()
    if span_context is not None and format(span_context.trace_id, "032x") == trace_id:
        parent_id = format(span_context.span_id, "016x")
        flags = format(int(span_context.trace_flags), "02x")
    else:
        # No span of ours to name as parent: a fresh id keeps the header well formed.
        parent_id, flags = secrets.token_hex(8), "01"
    return {"traceparent": f"00-{trace_id}-{parent_id}-{flags}", "X-Trace-Id": trace_id}


def _merged(existing: Any, added: Sequence[str]) -> list[str]:
    seen = list(existing) if isinstance(existing, Sequence) else []
    return seen + [i for i in dict.fromkeys(added) if i not in seen]


def note_on_span(records: Sequence[ContextRecord]) -> None:
    """Add to the current span the ids these records consumed (their parents from outside the
    batch) and produced, keeping what earlier derive() calls in the same span noted."""
    if otel_trace is None:
        return
    span = otel_trace.get_current_span()
    if not span.is_recording():
        return
    produced = [r.context_id for r in records]
    made_here = set(produced)
    consumed = [p for r in records for p in r.parent_ids if p not in made_here]
    noted = getattr(span, "attributes", None) or {}
    span.set_attribute(CONSUMED_ATTRIBUTE, _merged(noted.get(CONSUMED_ATTRIBUTE), consumed))
    span.set_attribute(PRODUCED_ATTRIBUTE, _merged(noted.get(PRODUCED_ATTRIBUTE), produced))
