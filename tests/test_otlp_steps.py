"""The rest of a RAG or agent run from its spans, each span exported on its own by the real
OpenTelemetry SDK (SimpleSpanProcessor) through the OTLP/HTTP exporter: reranking, where a
retrieval came from, answers over references lineage never recorded, and GenAI agent and tool
spans as agent steps."""

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from openinference.semconv.trace import DocumentAttributes, RerankerAttributes, SpanAttributes
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.trace import Span, Tracer

from lineage import derive
from lineage.api.app import create_app
from lineage.core.hashing import content_hash
from lineage.db.database import Database
from lineage.settings import Settings
from lineage.store import PostgresStore
from tests.live_server import serve


@pytest.fixture
def server(database_url: str) -> Iterator[str]:
    with serve(create_app(Settings(auth="none"), database_url=database_url)) as url:
        yield url


def exported(server: str, steps: Callable[[Tracer], None]) -> str:
    """Run `steps` under one root span, each span exported as it ends; the trace id."""
    provider = TracerProvider(resource=Resource.create({"service.name": "rag"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{server}/v1/traces")))
    tracer = provider.get_tracer("rag")
    with tracer.start_as_current_span("query") as root:
        steps(tracer)
    provider.shutdown()
    return format(root.get_span_context().trace_id, "032x")


async def trace_of(server: str, trace_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=server) as client:
        response = await client.get(f"/v1/traces/{trace_id}")
    assert response.status_code == 200, response.text
    trace: dict[str, Any] = response.json()
    return trace


async def walked_back(server: str, context_id: str) -> dict[str, dict[str, Any]]:
    async with httpx.AsyncClient(base_url=server) as client:
        walk = (await client.get(f"/v1/contexts/{context_id}/lineage")).json()
    return {node["context_id"]: node for node in walk["nodes"]}


def documents(span: Span, prefix: str, ids: list[str]) -> None:
    for n, context_id in enumerate(ids):
        span.set_attribute(f"{prefix}.{n}.{DocumentAttributes.DOCUMENT_ID}", context_id)
        span.set_attribute(f"{prefix}.{n}.{DocumentAttributes.DOCUMENT_SCORE}", 0.9 - n / 10)


def llm(tracer: Tracer, question: str = "How long do refunds take?") -> None:
    with tracer.start_as_current_span("llm") as span:
        span.set_attribute(SpanAttributes.OPENINFERENCE_SPAN_KIND, "LLM")
        span.set_attribute(SpanAttributes.LLM_MODEL_NAME, "gpt-test")
        span.set_attribute("llm.input_messages.0.message.content", question)
        span.set_attribute("llm.output_messages.0.message.content", "14 days.")


async def chunks(database: Database, count: int) -> list[str]:
    store = PostgresStore(database)
    doc = await derive(store, [], "Refunds policy", "document", "loader", "1", source_uri="kb/r")
    made = [await derive(store, [doc], f"Part {n}", "chunk", "splitter", "1") for n in range(count)]
    return [doc.context_id] + [chunk.context_id for chunk in made]


async def test_a_reranker_keeps_its_output_as_parents_and_names_what_it_dropped(
    server: str, database: Database
) -> None:
    doc, *ids = await chunks(database, 3)

    def steps(tracer: Tracer) -> None:
        with tracer.start_as_current_span("retrieve") as retrieve:
            retrieve.set_attribute(SpanAttributes.OPENINFERENCE_SPAN_KIND, "RETRIEVER")
            documents(retrieve, SpanAttributes.RETRIEVAL_DOCUMENTS, ids)
        with tracer.start_as_current_span("rerank") as rerank:
            rerank.set_attribute(SpanAttributes.OPENINFERENCE_SPAN_KIND, "RERANKER")
            rerank.set_attribute(RerankerAttributes.RERANKER_MODEL_NAME, "bge-reranker-v2")
            rerank.set_attribute(RerankerAttributes.RERANKER_TOP_K, 2)
            documents(rerank, RerankerAttributes.RERANKER_INPUT_DOCUMENTS, ids)
            documents(rerank, RerankerAttributes.RERANKER_OUTPUT_DOCUMENTS, [ids[2], ids[0]])
        llm(tracer)

    trace_id = await asyncio.to_thread(exported, server, steps)
    records = {r["kind"]: r for r in (await trace_of(server, trace_id))["records"]}
    rerank = records["rerank"]
    assert rerank["parent_ids"] == [ids[2], ids[0]]
    assert rerank["produced_by"] == "bge-reranker-v2"
    assert rerank["attributes"]["dropped"] == [ids[1]]
    assert rerank["attributes"]["top_k"] == 2
    reached = await walked_back(server, records["answer"]["context_id"])
    assert {rerank["context_id"], ids[0], ids[2], doc} <= set(reached)
    assert ids[1] not in reached  # the walk-back shows what was dropped, not as a source
    assert reached[rerank["context_id"]]["attributes"]["dropped"] == [ids[1]]


async def test_a_data_source_is_the_source_and_a_snapshot_only_where_one_is_named(
    server: str, database: Database
) -> None:
    _, chunk = await chunks(database, 1)

    def steps(tracer: Tracer) -> None:
        with tracer.start_as_current_span("search kb") as search:
            search.set_attribute(gen_ai_attributes.GEN_AI_OPERATION_NAME, "retrieval")
            search.set_attribute(gen_ai_attributes.GEN_AI_DATA_SOURCE_ID, "kb-vectors")
            search.set_attribute(
                gen_ai_attributes.GEN_AI_RETRIEVAL_DOCUMENTS, json.dumps([{"id": chunk}])
            )
        with tracer.start_as_current_span("retrieve") as retrieve:
            retrieve.set_attribute(SpanAttributes.OPENINFERENCE_SPAN_KIND, "RETRIEVER")
            documents(retrieve, SpanAttributes.RETRIEVAL_DOCUMENTS, [chunk])
            retrieve.set_attribute(
                f"{SpanAttributes.RETRIEVAL_DOCUMENTS}.0.{DocumentAttributes.DOCUMENT_METADATA}",
                json.dumps({"index_snapshot": "idx_2026_12_01"}),
            )

    trace_id = await asyncio.to_thread(exported, server, steps)
    records = (await trace_of(server, trace_id))["records"]
    by_name = {r["transform"]: r for r in records}
    assert (by_name["search kb"]["source_uri"], by_name["search kb"]["index_snapshot"]) == (
        "kb-vectors",
        None,
    )
    assert (by_name["retrieve"]["source_uri"], by_name["retrieve"]["index_snapshot"]) == (
        None,
        "idx_2026_12_01",
    )


async def test_an_answer_over_references_never_recorded_is_recorded_with_them(
    server: str,
) -> None:
    def steps(tracer: Tracer) -> None:
        with tracer.start_as_current_span("retrieve") as retrieve:
            retrieve.set_attribute(SpanAttributes.OPENINFERENCE_SPAN_KIND, "RETRIEVER")
            documents(retrieve, SpanAttributes.RETRIEVAL_DOCUMENTS, ["chunk_never_recorded"])
        llm(tracer)

    trace_id = await asyncio.to_thread(exported, server, steps)
    trace = await trace_of(server, trace_id)
    records = {r["kind"]: r for r in trace["records"]}
    assert set(records) == {"query", "prompt", "answer"}
    assert records["prompt"]["attributes"]["unknown_ids"] == ["chunk_never_recorded"]
    assert records["query"]["source_uri"] == f"otel://rag/{trace_id}"
    assert records["query"]["content_hash"] != content_hash("How long do refunds take?")
    assert {u["id"] for u in trace["unknown_ids"]} == {"chunk_never_recorded"}
    reached = await walked_back(server, records["answer"]["context_id"])
    assert set(reached) == {records[kind]["context_id"] for kind in ("query", "prompt", "answer")}


async def test_genai_agent_and_tool_spans_are_agent_steps(server: str) -> None:
    def steps(tracer: Tracer) -> None:
        with tracer.start_as_current_span("invoke_agent support") as agent:
            agent.set_attribute(gen_ai_attributes.GEN_AI_OPERATION_NAME, "invoke_agent")
            agent.set_attribute(gen_ai_attributes.GEN_AI_AGENT_NAME, "support")
            agent.set_attribute(gen_ai_attributes.GEN_AI_CONVERSATION_ID, "conv-1")
            agent.set_attribute(gen_ai_attributes.GEN_AI_REQUEST_MODEL, "gpt-test")
            with tracer.start_as_current_span("execute_tool lookup_order") as tool:
                tool.set_attribute(gen_ai_attributes.GEN_AI_OPERATION_NAME, "execute_tool")
                tool.set_attribute(gen_ai_attributes.GEN_AI_TOOL_NAME, "lookup_order")
                tool.set_attribute(gen_ai_attributes.GEN_AI_CONVERSATION_ID, "conv-1")
                tool.set_attribute(gen_ai_attributes.GEN_AI_TOOL_CALL_ARGUMENTS, '{"order": 7}')
                tool.set_attribute(gen_ai_attributes.GEN_AI_TOOL_CALL_RESULT, "shipped")
            agent.set_attribute(
                gen_ai_attributes.GEN_AI_OUTPUT_MESSAGES,
                json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Sent"}]}]),
            )

    trace_id = await asyncio.to_thread(exported, server, steps)
    records = {r["kind"]: r for r in (await trace_of(server, trace_id))["records"]}
    assert set(records) == {"tool_call", "reasoning"}
    tool, step = records["tool_call"], records["reasoning"]
    assert tool["attributes"] | {"otel": None} == {
        "tool": "lookup_order",
        "detail": "enhanced",
        "input_hash": content_hash('{"order": 7}'),
        "output_hash": content_hash("shipped"),
        "session_id": "conv-1",
        "otel": None,
    }
    assert (tool["parent_ids"], tool["source_uri"]) == ([], "tool://lookup_order")
    assert step["parent_ids"] == [tool["context_id"]]
    assert (step["attributes"]["agent"], step["attributes"]["session_id"]) == ("support", "conv-1")
    assert step["produced_by"] == "gpt-test"
