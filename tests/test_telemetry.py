"""One trace id per operation, OpenTelemetry spans beside the records, and JSON logs that carry
the trace id: with the real OpenTelemetry SDK, a real uvicorn server and a real PostgreSQL."""

import io
import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from prometheus_client import REGISTRY

from lineage import BadParameter, derive, derive_many
from lineage.api.app import create_app
from lineage.api.logs import JsonFormatter, TraceIdFilter
from lineage.core.derive import Derivation
from lineage.core.telemetry import (
    CONSUMED_ATTRIBUTE,
    PRODUCED_ATTRIBUTE,
    TRACE_ID,
    current_trace_id,
    trace_context,
)
from lineage.interop.span_processor import LineageSpanProcessor
from lineage.settings import Settings
from lineage.store import HttpStore, PostgresStore
from tests import live_server

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    # Not installed globally: start_as_current_span still makes its spans current.
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "rag-pipeline"}))
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield tracer_provider
    tracer_provider.shutdown()


@pytest.fixture
def live_url(database_url: str, settings: Settings) -> Iterator[str]:
    with live_server.serve(create_app(settings, database_url=database_url)) as url:
        yield url


async def document(store: PostgresStore, name: str) -> str:
    made = await derive(store, [], name, "document", "loader", "1", source_uri=f"s3://{name}")
    return made.context_id


# --- one trace id per operation -----------------------------------------------------------------


async def test_every_derive_inside_a_trace_context_records_its_id(store: PostgresStore) -> None:
    assert current_trace_id() is None
    with trace_context() as trace_id:
        assert TRACE_ID.match(trace_id)
        doc = await derive(store, [], "d", "document", "loader", "1", source_uri="s3://d")
        with trace_context() as inner:  # a nested entry point keeps the operation's id
            assert inner == trace_id
            [chunk, summary] = await derive_many(
                store,
                [
                    Derivation([doc], "c", "chunk", "chunker", "1"),
                    Derivation([doc], "s", "summary", "summariser", "1", trace_id=TRACE),
                ],
            )
    assert current_trace_id() is None
    assert doc.record.trace_id == chunk.record.trace_id == trace_id
    assert summary.record.trace_id == TRACE  # an explicit id wins
    with trace_context(TRACE) as given:
        assert given == TRACE
    with pytest.raises(BadParameter, match="W3C trace id"), trace_context("not a trace"):
        pass


async def test_derive_takes_the_current_spans_trace_id_and_notes_ids_on_the_span(
    store: PostgresStore, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    outside = await document(store, "outside")
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("retrieve") as span:
        span_trace_id = format(span.get_span_context().trace_id, "032x")
        first = await derive(store, [outside], "c1", "chunk", "chunker", "1")
        second = await derive(store, [first], "c2", "chunk", "chunker", "1")
    assert first.record.trace_id == second.record.trace_id == span_trace_id
    [finished] = exporter.get_finished_spans()
    assert finished.attributes is not None
    # Both derive() calls are noted; what the span made and then used is still consumed.
    assert list(finished.attributes[PRODUCED_ATTRIBUTE]) == [first.context_id, second.context_id]  # type: ignore[arg-type]
    assert list(finished.attributes[CONSUMED_ATTRIBUTE]) == [outside, first.context_id]  # type: ignore[arg-type]
    with tracer.start_as_current_span("load"), trace_context() as trace_id:
        assert trace_id == current_trace_id()  # the span's id, not a new one
        assert len(trace_id) == 32


async def test_http_store_sends_the_trace_id_and_the_service_answers_and_logs_it(
    client: httpx.AsyncClient,
) -> None:
    sent: list[httpx.Headers] = []

    async def remember(request: httpx.Request) -> None:
        sent.append(request.headers)

    client.event_hooks["request"].append(remember)
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(TraceIdFilter())
    access = logging.getLogger("lineage.access")
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    try:
        with trace_context() as trace_id:
            store = HttpStore("http://lineage", client=client)
            doc = await derive(store, [], "d", "document", "loader", "1", source_uri="s3://d")
        only_x_trace = await client.get("/healthz", headers={"X-Trace-Id": TRACE})
        parent = "00f067aa0ba902b7"
        traceparent = await client.get(
            "/healthz", headers={"traceparent": f"00-{'ab' * 16}-{parent}-01"}
        )
        neither = await client.get("/healthz")
    finally:
        access.removeHandler(handler)
    assert doc.record.trace_id == trace_id
    assert sent[0]["x-trace-id"] == trace_id
    assert sent[0]["traceparent"].startswith(f"00-{trace_id}-")
    assert only_x_trace.headers["x-trace-id"] == TRACE
    assert traceparent.headers["x-trace-id"] == "ab" * 16
    generated = neither.headers["x-trace-id"]
    assert TRACE_ID.match(generated) and generated not in {trace_id, TRACE}
    logged = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert [(line["path"], line["trace_id"]) for line in logged] == [
        ("/v1/contexts/batch", trace_id),
        ("/healthz", TRACE),
        ("/healthz", "ab" * 16),
        ("/healthz", generated),
    ]
    assert logged[0]["status"] == 201 and logged[0]["level"] == "info"


def test_lineage_serve_logs_json_lines_that_carry_the_trace_id(database_url: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "LINEAGE_DATABASE_URL": database_url, "LINEAGE_AUTH": "none"}
    with subprocess.Popen(
        [sys.executable, "-m", "lineage", "serve", "--port", str(port)],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    ) as server:
        assert server.stderr is not None
        try:
            startup = [server.stderr.readline()]
            while "Uvicorn running" not in startup[-1]:
                assert startup[-1], f"lineage serve stopped: {startup}"
                startup.append(server.stderr.readline())
            response = httpx.get(
                f"http://127.0.0.1:{port}/healthz", headers={"X-Trace-Id": TRACE}, timeout=30
            )
            assert response.headers["x-trace-id"] == TRACE
            # Connecting and migrating go on in the background: their lines may come first.
            later = [server.stderr.readline()]
            while '"/healthz"' not in later[-1] and len(later) < 50:
                assert later[-1], f"lineage serve stopped: {later}"
                later.append(server.stderr.readline())
        finally:
            server.terminate()
    # serve's notes to the operator (where it serves, whether keys are on) come before any log
    # line; from the first log line on, every line is a JSON object.
    lines = startup + later[:-1]
    first_log = next(i for i, line in enumerate(lines) if line.startswith("{"))
    assert all(not line.startswith("{") for line in lines[:first_log])
    for line in lines[first_log:]:
        assert json.loads(line)["level"] in {"info", "warning"}
    logged = json.loads(later[-1])
    assert logged["trace_id"] == TRACE and logged["path"] == "/healthz"


# --- spans sent to the service ------------------------------------------------------------------


async def test_the_span_processor_sends_spans_so_a_trace_shows_records_and_its_span_tree(
    store: PostgresStore,
    client: httpx.AsyncClient,
    live_url: str,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    processor = LineageSpanProcessor(live_url, schedule_delay_s=3600)
    provider.add_span_processor(processor)
    source = await document(store, "policy")
    tracer = provider.get_tracer("rag")
    with tracer.start_as_current_span("answer") as root:
        trace_id = format(root.get_span_context().trace_id, "032x")
        with tracer.start_as_current_span("retrieve"):
            chunk = await derive(store, [source], "c", "chunk", "chunker", "1")
        with tracer.start_as_current_span("generate") as generate:
            answer = await derive(store, [chunk], "a", "answer", "llm", "1")
            generate.set_status(Status(StatusCode.ERROR, "refused"))
    assert processor.force_flush()
    assert processor.dropped == 0

    response = await client.get(f"/v1/traces/{trace_id}")
    assert response.status_code == 200
    body = response.json()
    assert [r["context_id"] for r in body["records"]] == [chunk.context_id, answer.context_id]
    [tree] = body["spans"]
    exported = {format(s.context.span_id, "016x"): s for s in exporter.get_finished_spans()}
    assert tree["name"] == "answer" and tree["span_id"] in exported
    assert tree["parent_span_id"] is None and tree["service_name"] == "rag-pipeline"
    retrieve, generate_node = tree["children"]
    assert [retrieve["name"], generate_node["name"]] == ["retrieve", "generate"]
    assert retrieve["parent_span_id"] == tree["span_id"]
    assert retrieve["attributes"] == {
        # The instrumentation scope, as OTLP intake keeps it: what names a transport's SDK.
        "otel.scope.name": "rag",
        CONSUMED_ATTRIBUTE: [source],
        PRODUCED_ATTRIBUTE: [chunk.context_id],
    }
    assert generate_node["status_code"] == "ERROR"
    assert generate_node["status_message"] == "refused"
    assert tree["duration_ms"] >= generate_node["duration_ms"] >= 0
    assert set(exported) == {tree["span_id"], retrieve["span_id"], generate_node["span_id"]}
    assert body["spans_truncated"] is False

    # A span sent twice is stored once; a trace with spans but no records is still found.
    with tracer.start_as_current_span("alone") as alone:
        alone_trace = format(alone.get_span_context().trace_id, "032x")
    processor.force_flush()
    only_spans = (await client.get(f"/v1/traces/{alone_trace}")).json()
    assert only_spans["records"] == [] and only_spans["spans"][0]["name"] == "alone"
    processor.shutdown()


def degraded(reason: str) -> float:
    return REGISTRY.get_sample_value("lineage_degraded_total", {"reason": reason}) or 0.0


def test_the_span_processor_is_bounded_and_never_raises_when_the_service_is_down(
    provider: TracerProvider,
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        unreachable = f"http://127.0.0.1:{probe.getsockname()[1]}"
    processor = LineageSpanProcessor(
        unreachable, max_queued_spans=3, max_spans_per_trace=2, schedule_delay_s=3600
    )
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bounded")
    before = degraded("span_dropped"), degraded("span_export_failed")
    for trace in range(2):
        with tracer.start_as_current_span(f"trace {trace}"):
            for step in range(4):
                with tracer.start_as_current_span(f"step {step}"):
                    pass
    # Trace 0: 2 queued, 3 over its bound. Trace 1: 1 queued (3 in all), 4 over the total.
    assert processor.dropped == 7
    assert processor.force_flush()  # nothing left waiting, though nothing could be sent
    processor.shutdown()
    assert processor.dropped == 10
    assert degraded("span_dropped") - before[0] == 7
    assert degraded("span_export_failed") - before[1] == 3


async def test_post_spans_refuses_malformed_spans_with_a_clear_message(
    client: httpx.AsyncClient,
) -> None:
    good = {
        "trace_id": TRACE,
        "span_id": "00f067aa0ba902b7",
        "name": "step",
        "start_time_unix_nano": 2,
        "end_time_unix_nano": 3,
    }
    bad_cases = {
        "spans.0.trace_id": {**good, "trace_id": "0" * 32},
        "spans.0.span_id": {**good, "span_id": "xyz"},
        "spans.0: Value error, end_time_unix_nano is before": {**good, "end_time_unix_nano": 1},
        "spans.0: Value error, a span cannot be its own parent": {
            **good,
            "parent_span_id": good["span_id"],
        },
    }
    for where, span in bad_cases.items():
        response = await client.post("/v1/spans", json={"spans": [span]})
        assert response.status_code == 422
        assert where in response.json()["detail"]
    stored = await client.post("/v1/spans", json={"spans": [good, good | {"span_id": "1" * 16}]})
    assert stored.json() == {"received": 2, "stored": 2}
    again = await client.post("/v1/spans", json={"spans": [good]})
    assert again.json() == {"received": 1, "stored": 0}


def test_lineage_works_without_opentelemetry(database_url: str) -> None:
    script = """
import asyncio, sys
sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
from lineage import PostgresStore
from lineage import derive
from lineage.core import telemetry
from lineage.db.database import Database
from lineage.settings import Settings

async def main(url: str) -> None:
    database = await Database.connect(Settings(), url)
    with telemetry.trace_context() as trace_id:
        doc = await derive(PostgresStore(database), [], "t", "document", "l", "1", source_uri="s3://t")
        assert telemetry.outgoing_headers()["X-Trace-Id"] == trace_id
    await database.close()
    assert telemetry.otel_trace is None and doc.record.trace_id == trace_id
    print("recorded", doc.record.trace_id)

asyncio.run(main(sys.argv[1]))
"""
    done = subprocess.run(
        [sys.executable, "-c", script, database_url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("recorded ")
