"""OTLP/HTTP in: an ExportTraceServiceRequest, as the OpenTelemetry collector and
`opentelemetry-exporter-otlp-proto-http` send it (binary protobuf or its JSON form), becomes the
spans `POST /v1/spans` stores. Decoding is `opentelemetry-proto`'s (the `otlp` extra).

The JSON form is protobuf's JSON mapping with one difference the OTLP specification makes:
trace and span ids are hex, not base64. Attribute values become JSON: arrays and key-value
lists as lists and objects, bytes as base64, a non-finite double as its string ("NaN"). A span's
instrumentation scope becomes its `otel.scope.name` and `otel.scope.version` attributes.
"""

import base64
import binascii
import json
import math
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from lineage.core.errors import ExportTooLarge, InvalidExport, OtlpUnavailable
from lineage.core.telemetry import scope_attributes

try:
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
except ImportError:  # the otlp extra is optional
    ExportTraceServiceRequest = None  # type: ignore[assignment,misc]

from lineage.services.spans import SpanIn

__all__ = [
    "JSON",
    "PROTOBUF",
    "OtlpUnavailable",
    "decode_spans",
    "export_response",
    "media_type",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_SPAN_KINDS = {0: "INTERNAL", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
_STATUS_CODES = {0: "UNSET", 1: "OK", 2: "ERROR"}
# Where the OTLP JSON form puts hex ids that protobuf's JSON mapping would read as base64.
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def media_type(content_type: str | None) -> str | None:
    """PROTOBUF or JSON for a Content-Type header (parameters such as charset aside), else None."""
    base = (content_type or "").split(";")[0].strip().lower()
    return base if base in (PROTOBUF, JSON) else None


def _malformed(detail: str) -> InvalidExport:
    return InvalidExport("otlp_malformed", detail)


def _hex_ids_as_base64(message: Any, where: str) -> None:
    """Rewrite the OTLP JSON form's hex ids in place into the base64 that ParseDict reads."""
    if not isinstance(message, dict):
        return
    for field in _ID_FIELDS:
        value = message.get(field)
        if isinstance(value, str) and value:
            try:
                message[field] = base64.b64encode(bytes.fromhex(value)).decode()
            except ValueError as exc:
                raise _malformed(f"{where}.{field} {value[:40]!r} is not hex") from exc
    for index, link in enumerate(message.get("links") or []):
        _hex_ids_as_base64(link, f"{where}.links[{index}]")


def _parse(body: bytes, kind: str) -> Any:
    if ExportTraceServiceRequest is None:
        raise OtlpUnavailable(
            "OTLP intake needs opentelemetry-proto: install the service with `lineage[otlp]`"
        )
    if kind == PROTOBUF:
        try:
            return ExportTraceServiceRequest.FromString(body)
        except (DecodeError, RecursionError) as exc:
            raise _malformed(f"the body is not an OTLP ExportTraceServiceRequest: {exc}") from exc
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise _malformed(f"the body is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise _malformed("the body must be a JSON object (an ExportTraceServiceRequest)")
    for r, resource_spans in enumerate(_list(document.get("resourceSpans"))):
        for s, scope_spans in enumerate(_list(_dict(resource_spans).get("scopeSpans"))):
            for n, span in enumerate(_list(_dict(scope_spans).get("spans"))):
                _hex_ids_as_base64(span, f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]")
    try:
        return json_format.ParseDict(document, ExportTraceServiceRequest())
    except (json_format.ParseError, RecursionError, TypeError, ValueError) as exc:
        raise _malformed(f"not a valid OTLP ExportTraceServiceRequest: {exc}") from exc


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def any_value(value: "AnyValue") -> Any:
    """One OTLP attribute value as JSON."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    if which == "double_value" and not math.isfinite(value.double_value):
        return str(value.double_value)  # JSON (and jsonb) has no NaN or infinity
    return getattr(value, which)


def attributes_of(pairs: "list[KeyValue] | Any") -> dict[str, Any]:
    return {pair.key: any_value(pair.value) for pair in pairs}


def _hex(raw: bytes, size: int, what: str, where: str) -> str:
    if len(raw) != size:
        raise _malformed(f"{where}: {what} is {len(raw)} bytes; OTLP ids are {size} bytes")
    return binascii.hexlify(raw).decode()


def _span_in(span: "Span", service_name: str | None, scope: dict[str, str], where: str) -> SpanIn:
    status: Status = span.status
    try:
        return SpanIn(
            trace_id=_hex(span.trace_id, 16, "trace_id", where),
            span_id=_hex(span.span_id, 8, "span_id", where),
            parent_span_id=(
                _hex(span.parent_span_id, 8, "parent_span_id", where)
                if span.parent_span_id
                else None
            ),
            name=span.name,
            kind=_SPAN_KINDS.get(span.kind, "INTERNAL"),
            service_name=service_name,
            start_time_unix_nano=span.start_time_unix_nano,
            end_time_unix_nano=span.end_time_unix_nano,
            status_code=_STATUS_CODES.get(status.code, "UNSET"),
            status_message=status.message or None,
            attributes=scope | attributes_of(span.attributes),
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        )
        raise _malformed(f"{where}: {problems}") from exc


@dataclass(frozen=True)
class DecodedSpan:
    """A span as stored, and where in the request it was (for error messages)."""

    span: SpanIn
    where: str


def decode_spans(body: bytes, kind: str, max_spans: int) -> list[DecodedSpan]:
    """Every span of the request, checked as `POST /v1/spans` checks its spans; raises
    InvalidExport (`otlp_malformed`) or ExportTooLarge (`batch_too_large`) naming the first
    span at fault."""
    request = _parse(body, kind)
    count = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
    if count > max_spans:
        raise ExportTooLarge(
            "batch_too_large", f"{count} spans; send at most {max_spans} per request"
        )
    spans: list[DecodedSpan] = []
    for r, resource_spans in enumerate(request.resource_spans):
        resource = attributes_of(resource_spans.resource.attributes)
        service = resource.get("service.name")
        service_name = service if isinstance(service, str) and service else None
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            scope = scope_attributes(scope_spans.scope.name, scope_spans.scope.version)
            for n, span in enumerate(scope_spans.spans):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                spans.append(DecodedSpan(_span_in(span, service_name, scope, where), where))
    return spans


def export_response(kind: str, warning: str | None) -> bytes:
    """The ExportTraceServiceResponse: every span was accepted; a warning (unknown ids) goes in
    partial_success.error_message with no span rejected, as the specification allows."""
    if ExportTraceServiceRequest is None:
        raise OtlpUnavailable("opentelemetry-proto is not installed")
    response = ExportTraceServiceResponse()
    if warning:
        response.partial_success.rejected_spans = 0
        response.partial_success.error_message = warning
    if kind == PROTOBUF:
        serialized: bytes = response.SerializeToString()
        return serialized
    return json.dumps(json_format.MessageToDict(response)).encode()
