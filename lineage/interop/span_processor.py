"""An OpenTelemetry span processor that sends finished spans to the lineage service, so that
`GET /v1/traces/{trace_id}` shows a trace's span tree beside its records. Needs the `otel` extra.

    provider.add_span_processor(LineageSpanProcessor("http://lineage:8765", api_key=KEY))

Spans are sent from a background thread in batches (`POST /v1/spans`). It is bounded — at most
`max_spans_per_trace` spans of one trace and `max_queued_spans` waiting in all — and degrade-open:
a span that does not fit or cannot be sent is dropped and counted (`dropped`, and the
`lineage_degraded` metric), never raised into the traced code.
"""

import logging
import threading
import time
from collections import OrderedDict, deque
from typing import Any

import httpx
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from lineage.core import metrics
from lineage.core.telemetry import scope_attributes

log = logging.getLogger(__name__)

# How many traces' span counts are remembered for the per-trace bound.
TRACES_REMEMBERED = 10_000


def span_payload(span: ReadableSpan) -> dict[str, Any]:
    """One finished span as `POST /v1/spans` takes it."""
    context, parent, scope = span.context, span.parent, span.instrumentation_scope
    assert context is not None  # an SDK span always has one
    scoped = scope_attributes(scope.name, scope.version) if scope is not None else {}
    return {
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
        "parent_span_id": format(parent.span_id, "016x") if parent is not None else None,
        "name": span.name,
        "kind": span.kind.name,
        "service_name": span.resource.attributes.get("service.name"),
        "start_time_unix_nano": span.start_time,
        "end_time_unix_nano": span.end_time,
        "status_code": span.status.status_code.name,
        "status_message": span.status.description,
        "attributes": scoped
        | {
            key: list(value) if isinstance(value, tuple) else value
            for key, value in (span.attributes or {}).items()
        },
    }


class LineageSpanProcessor(SpanProcessor):
    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        client: httpx.Client | None = None,
        max_batch: int = 512,
        max_queued_spans: int = 10_000,
        max_spans_per_trace: int = 1_000,
        schedule_delay_s: float = 1.0,
        timeout_s: float = 5.0,
    ) -> None:
        if client is None and base_url is None:
            raise ValueError("LineageSpanProcessor needs the service's base_url (or a client)")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._owns_client = client is None
        self._client = client or httpx.Client(
            base_url=base_url or "", headers=headers, timeout=timeout_s
        )
        self.max_batch = max_batch
        self.max_queued_spans = max_queued_spans
        self.max_spans_per_trace = max_spans_per_trace
        self.schedule_delay_s = schedule_delay_s
        self.dropped = 0
        self._queue: deque[ReadableSpan] = deque()
        self._per_trace: OrderedDict[int, int] = OrderedDict()
        self._condition = threading.Condition()
        self._stopping = False
        self._worker = threading.Thread(target=self._run, name="lineage-spans", daemon=True)
        self._worker.start()

    def on_end(self, span: ReadableSpan) -> None:
        try:
            self._enqueue(span)
        except Exception:  # degrade-open: tracing must never fail the traced code
            log.exception("lineage span processor could not queue a span")
            self._drop(1, "span_dropped")

    def _enqueue(self, span: ReadableSpan) -> None:
        if span.context is None or not span.context.trace_flags.sampled:
            return
        trace_id = span.context.trace_id
        with self._condition:
            sent_of_trace = self._per_trace.get(trace_id, 0)
            full = len(self._queue) >= self.max_queued_spans
            if self._stopping or full or sent_of_trace >= self.max_spans_per_trace:
                self._drop(1, "span_dropped")
                return
            self._per_trace[trace_id] = sent_of_trace + 1
            self._per_trace.move_to_end(trace_id)
            if len(self._per_trace) > TRACES_REMEMBERED:
                self._per_trace.popitem(last=False)
            self._queue.append(span)
            if len(self._queue) >= self.max_batch:
                self._condition.notify()

    def _drop(self, spans: int, reason: str) -> None:
        with self._condition:
            self.dropped += spans
        metrics.count_degraded(reason, spans)

    def _take_batch(self) -> list[ReadableSpan]:
        with self._condition:
            return [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]

    def _send(self, batch: list[ReadableSpan]) -> None:
        # The export's own HTTP call must not be traced, or it would feed itself.
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            body = {"spans": [span_payload(span) for span in batch]}
            response = self._client.post("/v1/spans", json=body)
            response.raise_for_status()
        except Exception as exc:  # degrade-open: spans are best effort
            log.warning("lineage dropped %d spans it could not send: %r", len(batch), exc)
            self._drop(len(batch), "span_export_failed")
        finally:
            detach(token)

    def _drain(self, deadline: float) -> bool:
        """Send what is queued, batch by batch; False if the deadline came first."""
        while batch := self._take_batch():
            self._send(batch)
            if time.monotonic() >= deadline:
                break
        return not self._queue

    def _run(self) -> None:
        while True:
            with self._condition:
                if not self._stopping and len(self._queue) < self.max_batch:
                    self._condition.wait(self.schedule_delay_s)
                if self._stopping:
                    return
            # One batch per turn, so shutdown waits for one send at most.
            if batch := self._take_batch():
                self._send(batch)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._drain(time.monotonic() + timeout_millis / 1000)

    def shutdown(self, timeout_millis: int = 30_000) -> None:
        """Send what is queued within the timeout; drop (and count) the rest."""
        with self._condition:
            if self._stopping:
                return
            self._stopping = True
            self._condition.notify()
        self._worker.join()
        self._drain(time.monotonic() + timeout_millis / 1000)
        with self._condition:
            left, self._queue = len(self._queue), deque()
        if left:
            self._drop(left, "span_dropped")
        if self._owns_client:
            self._client.close()
