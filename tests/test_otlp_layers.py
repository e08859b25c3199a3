"""Layered provenance from spans: the real OpenTelemetry SDK exports a request (its entry span),
an LLM call under it (provider, model, parameters) and the HTTP attempts under that (the
backend's request id) through the OTLP/HTTP exporter; the answer's header, envelope and
walk-back show the three layers nested, and nothing that no span said."""

import asyncio
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml
from openinference.semconv.trace import DocumentAttributes, SpanAttributes
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.trace import SpanKind
from typer.testing import CliRunner

from lineage import cli, derive, render_for_prompt
from lineage.api.app import create_app
from lineage.db.database import Database
from lineage.interop.span_processor import span_payload
from lineage.settings import Settings
from lineage.store import PostgresStore
from tests.live_server import serve

VARIABLES = json.dumps({"question": "How long do refunds take?"})


@pytest.fixture
def server(database_url: str) -> Iterator[str]:
    with serve(create_app(Settings(auth="none"), database_url=database_url)) as url:
        yield url


def sha256(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def run_request(server: str, chunk: Any, *, detailed: bool) -> str:
    """A request whose LLM call is instrumented by hand (OpenInference and GenAI attributes)
    and whose HTTP client made two attempts; with detailed=False, an LLM span naming only its
    model and no client span under it. Each span is exported as it ends."""
    provider = TracerProvider(resource=Resource.create({"service.name": "support-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{server}/v1/traces")))
    tracer = provider.get_tracer("rag")
    client = provider.get_tracer("openai-sdk", "1.51.0")
    with tracer.start_as_current_span("POST /ask", kind=SpanKind.SERVER) as root:
        root.set_attribute("http.route", "/ask")
        root.set_attribute("http.request.method", "POST")
        root.set_attribute(SpanAttributes.SESSION_ID, "sess_7")
        with tracer.start_as_current_span("retrieve") as retrieve:
            retrieve.set_attribute(SpanAttributes.OPENINFERENCE_SPAN_KIND, "RETRIEVER")
            document = f"{SpanAttributes.RETRIEVAL_DOCUMENTS}.0.{DocumentAttributes.DOCUMENT_ID}"
            retrieve.set_attribute(document, chunk.context_id)
        with tracer.start_as_current_span("ChatOpenAI") as llm:
            llm.set_attribute(SpanAttributes.OPENINFERENCE_SPAN_KIND, "LLM")
            llm.set_attribute(SpanAttributes.LLM_MODEL_NAME, "gpt-4o-mini")
            llm.set_attribute("llm.input_messages.0.message.content", render_for_prompt([chunk]))
            llm.set_attribute("llm.output_messages.0.message.content", "14 days.")
            if detailed:
                llm.set_attribute("llm.provider", "openai")
                llm.set_attribute(
                    SpanAttributes.LLM_INVOCATION_PARAMETERS,
                    json.dumps({"temperature": 0.7, "max_tokens": 256, "model": "gpt-4o-mini"}),
                )
                # The GenAI request attributes are what the call was made with: they win.
                llm.set_attribute(gen_ai_attributes.GEN_AI_REQUEST_TEMPERATURE, 0.2)
                llm.set_attribute(gen_ai_attributes.GEN_AI_REQUEST_TOP_P, 0.9)
                llm.set_attribute(SpanAttributes.LLM_PROMPT_TEMPLATE_VARIABLES, VARIABLES)
                llm.set_attribute(SpanAttributes.LLM_PROMPT_TEMPLATE_VERSION, "refunds@v3")
                for attempt, (status, response_id) in enumerate(
                    [(429, None), (200, "chatcmpl-9xYz")]
                ):
                    with client.start_as_current_span(
                        "POST /v1/chat/completions", kind=SpanKind.CLIENT
                    ) as http:
                        http.set_attribute("http.response.status_code", status)
                        if attempt:
                            http.set_attribute("http.request.resend_count", attempt)
                        if response_id:
                            http.set_attribute(gen_ai_attributes.GEN_AI_RESPONSE_ID, response_id)
    provider.shutdown()
    return format(root.get_span_context().trace_id, "032x")


async def answer_of(server: str, trace_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The trace's answer record and the trace's spans, earliest first."""
    async with httpx.AsyncClient(base_url=server) as client:
        trace = (await client.get(f"/v1/traces/{trace_id}")).json()
    spans: list[dict[str, Any]] = []
    frontier = list(trace["spans"])
    while frontier:
        span = frontier.pop()
        spans.append(span)
        frontier += span["children"]
    spans.sort(key=lambda s: s["start_time"])
    (answer,) = [r for r in trace["records"] if r["kind"] == "answer"]
    return answer, spans


async def chunk_of(database: Database) -> Any:
    store = PostgresStore(database, "default")
    doc = await derive(store, [], "Refunds policy", "document", "loader", "1", source_uri="kb/r")
    return await derive(store, [doc], "Refunds take 14 days.", "chunk", "splitter", "1")


async def test_the_answer_header_nests_request_service_and_transport(
    server: str, database: Database
) -> None:
    chunk = await chunk_of(database)
    trace_id = await asyncio.to_thread(run_request, server, chunk, detailed=True)
    answer, spans = await answer_of(server, trace_id)
    # The layers are read from the stored spans: the record keeps only its span's identity.
    assert set(answer["attributes"]) == {"otel", "model"}

    async with httpx.AsyncClient(base_url=server) as client:
        path = f"/v1/contexts/{answer['context_id']}/header"
        envelope = (await client.get(path)).json()["provenance"]
        as_yaml = (await client.get(path, params={"format": "yaml"})).text
    assert (envelope["provider"], envelope["model"]) == ("openai", "gpt-4o-mini")
    request = envelope["request"]
    named = {s["name"]: s for s in spans}
    root, llm = named["POST /ask"], named["ChatOpenAI"]
    assert request == {
        "trace_id": trace_id,
        "span_id": root["span_id"],
        "operation": "POST /ask",
        "started_at": root["start_time"],
        "finished_at": root["end_time"],
        "caller": {"service": "support-bot", "session_id": "sess_7", "route": "/ask"}
        | {"method": "POST"},
        "service": request["service"],
    }
    service = request["service"]
    attempts = [s["span_id"] for s in spans if s["name"] == "POST /v1/chat/completions"]
    assert service == {
        "span_id": llm["span_id"],
        "operation": "ChatOpenAI",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "parameters": {"max_tokens": 256, "temperature": 0.2, "top_p": 0.9},
        "attempts": 2,
        # The documented rule: the input attributes' hashes as sorted `key=hash` lines.
        "input_fingerprint": sha256(
            "llm.input_messages.0.message.content=" + sha256(render_for_prompt([chunk])) + "\n"
        ),
        "variables_fingerprint": sha256(VARIABLES),
        "prompt_version": "refunds@v3",
        "started_at": llm["start_time"],
        "finished_at": llm["end_time"],
        "transport": service["transport"],
    }
    transport = service["transport"]
    assert [t["span_id"] for t in transport] == attempts
    assert transport[1] == {
        "span_id": attempts[1],
        "operation": "POST /v1/chat/completions",
        "request_id": "chatcmpl-9xYz",
        "retries": 1,
        "status_code": 200,
        "sdk": "openai-sdk@1.51.0",
    }
    assert (transport[0]["request_id"], transport[0]["retries"]) == (None, None)
    assert transport[0]["status_code"] == 429
    # The YAML front-matter carries the same nested layers.
    block = as_yaml.split("---\n")[1]
    assert yaml.safe_load(block) == {"provenance": envelope}


async def test_layers_say_only_what_the_spans_said(server: str, database: Database) -> None:
    chunk = await chunk_of(database)
    trace_id = await asyncio.to_thread(run_request, server, chunk, detailed=False)
    answer, _ = await answer_of(server, trace_id)
    async with httpx.AsyncClient(base_url=server) as client:
        path = f"/v1/contexts/{answer['context_id']}/header"
        envelope = (await client.get(path)).json()["provenance"]
    assert envelope["provider"] is None
    service = envelope["request"]["service"]
    assert service["model"] == "gpt-4o-mini"
    assert {
        k: service[k] for k in service if k not in ("span_id", "started_at", "finished_at")
    } == {
        "operation": "ChatOpenAI",
        "provider": None,
        "model": "gpt-4o-mini",
        "parameters": {},
        "attempts": None,
        "input_fingerprint": service["input_fingerprint"],
        "variables_fingerprint": None,
        "prompt_version": None,
        "transport": [],
    }
    # The chunk was recorded by the SDK, in no trace: no layer at all.
    async with httpx.AsyncClient(base_url=server) as client:
        header = (await client.get(f"/v1/contexts/{chunk.context_id}/header")).json()
    assert header["provenance"]["request"] is None


async def test_a_walk_back_shows_the_layers_hop_by_hop(
    server: str, database: Database, database_url: str
) -> None:
    chunk = await chunk_of(database)
    trace_id = await asyncio.to_thread(run_request, server, chunk, detailed=True)
    answer, spans = await answer_of(server, trace_id)
    path = f"/v1/contexts/{answer['context_id']}/lineage"
    async with httpx.AsyncClient(base_url=server) as client:
        plain = (await client.get(path)).json()
        layered = (await client.get(path, params={"layers": "true"})).json()
    assert all("request" not in node for node in plain["nodes"])
    hops = {node["kind"]: node["request"] for node in layered["nodes"]}
    # The prompt derives from the context block it rendered: the chunk, not the retrieval.
    assert set(hops) == {"answer", "prompt", "chunk", "document"}
    named = {s["name"]: s["span_id"] for s in spans}
    # Each hop made from a span has that span as its service, under the one request.
    assert {kind: (r["span_id"], r["service"]["span_id"]) for kind, r in hops.items() if r} == {
        "answer": (named["POST /ask"], named["ChatOpenAI"]),
        "prompt": (named["POST /ask"], named["ChatOpenAI"]),
    }
    assert hops["answer"]["service"]["transport"][1]["request_id"] == "chatcmpl-9xYz"
    # A processing span (the retrieval) is a service layer too, with what it said only.
    async with httpx.AsyncClient(base_url=server) as client:
        trace = (await client.get(f"/v1/traces/{trace_id}")).json()
        (retrieval,) = [r["context_id"] for r in trace["records"] if r["kind"] == "retrieval"]
        header = (await client.get(f"/v1/contexts/{retrieval}/header")).json()["provenance"]
    service = header["request"]["service"]
    assert (service["span_id"], service["operation"]) == (named["retrieve"], "retrieve")
    assert (service["provider"], service["model"], service["transport"]) == (None, None, [])
    assert hops["chunk"] is None and hops["document"] is None

    printed = await asyncio.to_thread(
        CliRunner().invoke,
        cli.app,
        ["walk", answer["context_id"], "--layers", "--format", "json"],
        env={"LINEAGE_DATABASE_URL": database_url},
    )
    assert printed.exit_code == 0, printed.output
    walked = {n["context_id"]: n["request"] for n in json.loads(printed.stdout)["nodes"]}
    assert walked == {node["context_id"]: node["request"] for node in layered["nodes"]}
    tree = await asyncio.to_thread(
        CliRunner().invoke,
        cli.app,
        ["walk", answer["context_id"], "--layers"],
        env={"LINEAGE_DATABASE_URL": database_url, "COLUMNS": "300"},
    )
    assert "via openai gpt-4o-mini ChatOpenAI" in tree.stdout
    assert "request chatcmpl-9xYz" in tree.stdout


async def test_a_record_derived_in_a_traced_request_has_that_request_as_its_layer(
    server: str, database: Database
) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "indexer"}))
    finished = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(finished))
    tracer = provider.get_tracer("indexer", "2.0")
    store = PostgresStore(database, "default")
    with tracer.start_as_current_span("reindex", kind=SpanKind.SERVER) as root:
        doc = await derive(store, [], "Refunds policy", "document", "loader", "1", source_uri="kb")
    # The spans reach the service through the SDK's span processor route, not OTLP.
    async with httpx.AsyncClient(base_url=server) as client:
        spans = [span_payload(span) for span in finished.get_finished_spans()]
        assert (await client.post("/v1/spans", json={"spans": spans})).status_code == 200
        header = (await client.get(f"/v1/contexts/{doc.context_id}/header")).json()
    request = header["provenance"]["request"]
    assert (
        request["trace_id"]
        == doc.record.trace_id
        == format(root.get_span_context().trace_id, "032x")
    )
    assert (request["operation"], request["caller"]) == ("reindex", {"service": "indexer"})
    # Made by derive(), from no span of its own: a request, and no service call invented.
    assert request["service"] is None
    scope = {k: v for k, v in spans[0]["attributes"].items() if k.startswith("otel.scope.")}
    assert scope == {"otel.scope.name": "indexer", "otel.scope.version": "2.0"}


def run_gen_ai_call(server: str, chunk: Any) -> str:
    """A GenAI client span, as the OpenTelemetry GenAI instrumentations make it: the call is
    itself the CLIENT span that carries the backend's response id."""
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{server}/v1/traces")))
    tracer = provider.get_tracer("opentelemetry.instrumentation.anthropic", "0.40.0")
    with tracer.start_as_current_span("chat claude-x", kind=SpanKind.CLIENT) as chat:
        chat.set_attribute(gen_ai_attributes.GEN_AI_OPERATION_NAME, "chat")
        chat.set_attribute("gen_ai.provider.name", "anthropic")
        chat.set_attribute(gen_ai_attributes.GEN_AI_REQUEST_MODEL, "claude-x")
        chat.set_attribute(gen_ai_attributes.GEN_AI_RESPONSE_MODEL, "claude-x-20261201")
        chat.set_attribute(gen_ai_attributes.GEN_AI_REQUEST_MAX_TOKENS, 512)
        chat.set_attribute(gen_ai_attributes.GEN_AI_REQUEST_STOP_SEQUENCES, ["\n\nHuman:"])
        chat.set_attribute(gen_ai_attributes.GEN_AI_RESPONSE_ID, "msg_01AbC")
        # The rendered prompt as plain text too: the intake finds context blocks in
        # `input.value`, not inside the JSON-escaped messages.
        chat.set_attribute(SpanAttributes.INPUT_VALUE, render_for_prompt([chunk]))
        messages = [{"role": "user", "content": render_for_prompt([chunk])}]
        chat.set_attribute(gen_ai_attributes.GEN_AI_INPUT_MESSAGES, json.dumps(messages))
        answer = [{"role": "assistant", "content": "14 days."}]
        chat.set_attribute(gen_ai_attributes.GEN_AI_OUTPUT_MESSAGES, json.dumps(answer))
    provider.shutdown()
    return format(chat.get_span_context().trace_id, "032x")


async def test_a_gen_ai_client_span_is_its_own_transport(server: str, database: Database) -> None:
    chunk = await chunk_of(database)
    trace_id = await asyncio.to_thread(run_gen_ai_call, server, chunk)
    answer, spans = await answer_of(server, trace_id)
    async with httpx.AsyncClient(base_url=server) as client:
        path = f"/v1/contexts/{answer['context_id']}/header"
        header = (await client.get(path)).json()["provenance"]
    [chat] = spans
    request = header["request"]
    # The call is the whole trace: its own entry span, service call and transport.
    assert (request["span_id"], request["operation"]) == (chat["span_id"], "chat claude-x")
    service = request["service"]
    assert (service["operation"], service["provider"], service["model"]) == (
        "chat",
        "anthropic",
        "claude-x-20261201",
    )
    assert service["parameters"] == {"max_tokens": 512, "stop_sequences": ["\n\nHuman:"]}
    assert service["attempts"] == 1
    assert service["transport"] == [
        {
            "span_id": chat["span_id"],
            "operation": "chat claude-x",
            "request_id": "msg_01AbC",
            "retries": None,
            "status_code": None,
            "sdk": "opentelemetry.instrumentation.anthropic@0.40.0",
        }
    ]


def run_framework_over_client_span(server: str, chunk: Any) -> str:
    """A framework's LLM span (OpenInference: model, invocation parameters, no provider) over
    the GenAI client span of the SDK it called, which captured no content (the default), each
    span exported as it ends: the client span first."""
    provider = TracerProvider(resource=Resource.create({"service.name": "rag"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{server}/v1/traces")))
    framework = provider.get_tracer("openinference.instrumentation.llama_index", "4.6.1")
    sdk = provider.get_tracer("opentelemetry.instrumentation.openai_v2", "2.1b0")
    with framework.start_as_current_span("OpenAI.complete") as llm:
        llm.set_attribute(SpanAttributes.OPENINFERENCE_SPAN_KIND, "LLM")
        llm.set_attribute(SpanAttributes.LLM_MODEL_NAME, "gpt-4o-mini")
        llm.set_attribute(
            SpanAttributes.LLM_INVOCATION_PARAMETERS,
            json.dumps({"model_name": "gpt-4o-mini", "context_window": 128000}),
        )
        llm.set_attribute(SpanAttributes.LLM_PROMPTS, [render_for_prompt([chunk])])
        llm.set_attribute(SpanAttributes.OUTPUT_VALUE, "14 days.")
        with sdk.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT) as chat:
            chat.set_attribute(gen_ai_attributes.GEN_AI_OPERATION_NAME, "chat")
            chat.set_attribute("gen_ai.provider.name", "openai")
            chat.set_attribute(gen_ai_attributes.GEN_AI_REQUEST_MODEL, "gpt-4o-mini")
            chat.set_attribute(gen_ai_attributes.GEN_AI_RESPONSE_ID, "chatcmpl-Q7")
    provider.shutdown()
    return format(llm.get_span_context().trace_id, "032x")


async def test_a_framework_llm_span_over_its_sdks_client_span_is_one_call_with_its_transport(
    server: str, database: Database
) -> None:
    chunk = await chunk_of(database)
    trace_id = await asyncio.to_thread(run_framework_over_client_span, server, chunk)
    async with httpx.AsyncClient(base_url=server) as client:
        trace = (await client.get(f"/v1/traces/{trace_id}")).json()
    # The client span carries no content: it makes no prompt of its own.
    assert sorted(r["kind"] for r in trace["records"]) == ["answer", "prompt"]
    answer, spans = await answer_of(server, trace_id)
    named = {s["name"]: s["span_id"] for s in spans}
    async with httpx.AsyncClient(base_url=server) as client:
        path = f"/v1/contexts/{answer['context_id']}/header"
        header = (await client.get(path)).json()["provenance"]
    service = header["request"]["service"]
    assert service["span_id"] == named["OpenAI.complete"]
    # OpenInference names no provider for this LLM class: the SDK's client span does.
    assert (service["provider"], service["model"]) == ("openai", "gpt-4o-mini")
    assert service["parameters"] == {"context_window": 128000}
    assert [(t["span_id"], t["request_id"]) for t in service["transport"]] == [
        (named["chat gpt-4o-mini"], "chatcmpl-Q7")
    ]
