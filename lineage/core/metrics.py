"""Prometheus metrics: what the service exposes at GET /metrics, and what any lineage code
(store, walks, span processor, spool) calls to count.

Reasons passed to `count_degraded` name a fixed set of places (`span_dropped`,
`span_export_failed`, `event_listener_failed`, and the spool's own), never ids or messages, so
the label stays small. A process without the API (a pipeline using the SDK) can expose the same
metrics with `prometheus_client.start_http_server(port)`.
"""

import collections
import os
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

# Where the processes of `lineage serve --workers N` keep their metrics (prometheus_client's
# multiprocess mode, which reads it when first imported): /metrics then sums every process's.
MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"

RECORDS_APPENDED = Counter(
    "lineage_records_appended", "Records appended (new rows, not replays), by kind.", ["kind"]
)
WALK_SECONDS = Histogram(
    "lineage_walk_seconds", "Time one named graph query took, by query name.", ["query"]
)
DEGRADED = Counter(
    "lineage_degraded",
    "Lineage work given up so that the caller's pipeline could go on (degrade-open), by reason.",
    ["reason"],
)
SPOOL_DEPTH = Gauge(
    "lineage_spool_depth",
    "Records waiting in the local spool to be sent.",
    multiprocess_mode="livesum",
)
SPANS_STORED = Counter("lineage_spans_stored", "Spans received and stored (new ones).")
OTLP_UNKNOWN_IDS = Counter(
    "lineage_otlp_unknown_ids",
    "Ids, sources or contents named by spans sent to POST /v1/traces that no record stands for.",
)
CHECKPOINTS_REFUSED = Counter(
    "lineage_checkpoints_refused",
    "Checkpoints the signer refused to sign: the stored log does not extend what it signed "
    "(runbooks/backup.md). Any increase wants an operator.",
)
CONNECTIONS_CLOSED = Counter(
    "lineage_connections_closed",
    "Connections closed before they were a request: header_timeout (headers not complete in "
    "LINEAGE_HEADER_READ_TIMEOUT_S) or address_cap (LINEAGE_MAX_CONNECTIONS_PER_ADDRESS).",
    ["reason"],
)
LOG_QUEUED = Gauge(
    "lineage_log_queued_records",
    "Records appended but not yet integrated into their tenant's log, by tenant, as last seen "
    "by a sequencing step (the background round drains them LINEAGE_LOG_STEP_LEAVES at a time).",
    ["tenant"],
    multiprocess_mode="mostrecent",
)
WORK_IN_PROGRESS = Gauge(
    "lineage_work_in_progress",
    "Heavy requests holding a fair-share slot now (work=heavy: exports, impact files, streamed "
    "impact; work=event_stream: live event streams).",
    ["work"],
    multiprocess_mode="livesum",
)
WORK_REFUSED = Counter(
    "lineage_work_refused",
    "Heavy requests (work=heavy: exports, impact files, streamed impact; work=event_stream) "
    "answered 429 because the key or tenant (limit) already held its share "
    "(LINEAGE_MAX_HEAVY_PER_*, LINEAGE_MAX_EVENT_STREAMS_PER_*).",
    ["work", "limit"],
)
POSTINGS_MERGED = Counter(
    "lineage_postings_rows",
    "Invalidation postings rows the background round merged (rows=merged: small rows deleted; "
    "rows=written: rows of up to 1,000 ids written in their place).",
    ["rows"],
)
EVENT_STREAMS = Gauge(
    "lineage_event_streams", "Live event streams open now.", multiprocess_mode="livesum"
)


def count_appended(kinds: Iterable[str]) -> None:
    for kind, appended in collections.Counter(kinds).items():  # a label lookup per kind
        RECORDS_APPENDED.labels(kind).inc(appended)


def time_walk(query: str) -> AbstractContextManager[Any]:
    """`with time_walk("walk_back"): ...` observes the block's duration."""
    return WALK_SECONDS.labels(query).time()


def count_degraded(reason: str, amount: int = 1) -> None:
    DEGRADED.labels(reason).inc(amount)


def count_checkpoint_refused() -> None:
    CHECKPOINTS_REFUSED.inc()


def count_postings_merged(merged: int, written: int) -> None:
    POSTINGS_MERGED.labels("merged").inc(merged)
    POSTINGS_MERGED.labels("written").inc(written)


def set_log_queued(tenant_id: str, queued: int) -> None:
    LOG_QUEUED.labels(tenant_id).set(queued)


def count_work_refused(work: str, limit: str) -> None:
    WORK_REFUSED.labels(work, limit).inc()


def count_connection_closed(reason: str) -> None:
    CONNECTIONS_CLOSED.labels(reason).inc()


def set_spool_depth(records: int) -> None:
    SPOOL_DEPTH.set(records)


def exposition() -> tuple[bytes, str]:
    """The metrics in the Prometheus text format (of every process, in multiprocess mode), and
    its content type."""
    if MULTIPROCESS_DIR not in os.environ:
        return generate_latest(), CONTENT_TYPE_LATEST
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return generate_latest(registry), CONTENT_TYPE_LATEST


def process_ended() -> None:
    """In multiprocess mode, drop this process's live gauges from the sums."""
    if MULTIPROCESS_DIR in os.environ:
        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
