"""OTLP/HTTP intake (`POST /v1/traces`): the real OpenTelemetry SDK and its OTLP/HTTP exporter
against a real uvicorn server and PostgreSQL; lineage from OpenInference and GenAI spans."""

import asyncio
import gzip
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openinference.semconv.trace import DocumentAttributes, SpanAttributes
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes

from lineage import derive, render_for_prompt
from lineage.api.app import create_app
from lineage.core.hashing import content_hash
from lineage.db.database import Database
from lineage.interop import otlp_reading
from lineage.services import auth
from lineage.settings import Settings
from lineage.store import PostgresStore
from tests.live_server import serve

TENANT = "acme"
RIVAL = "rival"
MAX_SPANS = 20


@pytest.fixture
def server(database_url: str) -> Iterator[str]:
    settings = Settings(statement_timeout_ms=5000, auth="keys", max_spans_per_request=MAX_SPANS)
    with serve(create_app(settings, database_url=database_url)) as url:
        yield url


@pytest.fixture
async def keys(database: Database, owner_database: Database) -> dict[str, str]:
    for tenant in (TENANT, RIVAL):
        await auth.create_tenant(owner_database, tenant)
    return {
        "ingest": (await auth.create_key(database, TENANT, "ingest"))[0],
        "read": (await auth.create_key(database, TENANT, "read"))[0],
        "rival": (await auth.create_key(database, RIVAL, "ingest"))[0],
        "rival_read": (await auth.create_key(database, RIVAL, "read"))[0],
    }


def tracer_provider(server: str, key: str) -> TracerProvider:
    """The SDK exporting each span as it ends: one OTLP request per span."""
    exporter = OTLPSpanExporter(
        endpoint=f"{server}/v1/traces",
        headers={"Authorization": f"Bearer {key}"},
        compression=Compression.Gzip,
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "rag"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


async def get(server: str, key: str, path: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server) as client:
        return await client.get(path, headers={"Authorization": f"Bearer {key}"})


async def indexed(database: Database) -> dict[str, Any]:
    store = PostgresStore(database, TENANT)
    doc = await derive(store, [], "Refunds policy", "document", "loader", "1", source_uri="kb/r")
    chunk = await derive(store, [doc], "Refunds take 14 days.", "chunk", "splitter", "1")
    other = await derive(store, [], "Shipping", "document", "loader", "1", source_uri="kb/ship")
    return {"doc": doc, "chunk": chunk, "other": other}


def run_pipeline(provider: TracerProvider, made: dict[str, Any]) -> str:
    """A RAG step instrumented by hand with OpenInference and GenAI attributes; no lineage code."""
    tracer = provider.get_tracer("rag")
    with tracer.start_as_current_span("query") as root:
        with tracer.start_as_current_span("retrieve") as retrieve:
            retrieve.set_attribute(SpanAttributes.OPENINFERENCE_SPAN_KIND, "RETRIEVER")
            retrieve.set_attribute(SpanAttributes.INPUT_VALUE, "how long do refunds take?")
            prefix = f"{SpanAttributes.RETRIEVAL_DOCUMENTS}.0."
            retrieve.set_attribute(
                prefix + DocumentAttributes.DOCUMENT_ID, made["chunk"].context_id
            )
            retrieve.set_attribute(prefix + DocumentAttributes.DOCUMENT_SCORE, 0.91)
            retrieve.set_attribute(prefix + DocumentAttributes.DOCUMENT_CONTENT, "Refunds take")
            prefix = f"{SpanAttributes.RETRIEVAL_DOCUMENTS}.1."
            retrieve.set_attribute(prefix + DocumentAttributes.DOCUMENT_ID, "chunk_never_recorded")
        with tracer.start_as_current_span("search") as search:
            search.set_attribute(gen_ai_attributes.GEN_AI_OPERATION_NAME, "retrieval")
            search.set_attribute(gen_ai_attributes.GEN_AI_DATA_SOURCE_ID, "kb-index@2026-12-01")
            search.set_attribute(
                gen_ai_attributes.GEN_AI_RETRIEVAL_DOCUMENTS,
                json.dumps([{"id": made["other"].context_id, "score": 0.5}]),
            )
        with tracer.start_as_current_span("llm") as llm:
            llm.set_attribute(SpanAttributes.OPENINFERENCE_SPAN_KIND, "LLM")
            llm.set_attribute(SpanAttributes.LLM_MODEL_NAME, "gpt-test")
            prompt = render_for_prompt([made["chunk"]]) + '\n<context id="ctx_gone">x</context>'
            llm.set_attribute("llm.input_messages.0.message.content", prompt)
            llm.set_attribute("llm.output_messages.0.message.content", "14 days.")
        return format(root.get_span_context().trace_id, "032x")


def test_our_attribute_names_are_the_semantic_conventions() -> None:
    assert otlp_reading.OI_SPAN_KIND == SpanAttributes.OPENINFERENCE_SPAN_KIND
    assert otlp_reading.OI_INPUT == SpanAttributes.INPUT_VALUE
    assert otlp_reading.OI_OUTPUT == SpanAttributes.OUTPUT_VALUE
    assert otlp_reading.OI_PROMPTS == SpanAttributes.LLM_PROMPTS
    assert otlp_reading.OI_MODEL == SpanAttributes.LLM_MODEL_NAME
    assert otlp_reading.GEN_AI_OPERATION == gen_ai_attributes.GEN_AI_OPERATION_NAME
    assert otlp_reading.GEN_AI_DOCUMENTS == gen_ai_attributes.GEN_AI_RETRIEVAL_DOCUMENTS
    assert otlp_reading.GEN_AI_DATA_SOURCE == gen_ai_attributes.GEN_AI_DATA_SOURCE_ID
    assert otlp_reading.GEN_AI_INPUT == gen_ai_attributes.GEN_AI_INPUT_MESSAGES
    assert otlp_reading.GEN_AI_OUTPUT == gen_ai_attributes.GEN_AI_OUTPUT_MESSAGES
    document = f"{SpanAttributes.RETRIEVAL_DOCUMENTS}.3.{DocumentAttributes.DOCUMENT_SCORE}"
    assert otlp_reading.OI_DOCUMENTS.match(document)


async def test_the_real_exporter_gives_a_walk_back_from_answer_to_documents(
    server: str, keys: dict[str, str], database: Database
) -> None:
    made = await indexed(database)
    provider = tracer_provider(server, keys["ingest"])
    trace_id = await asyncio.to_thread(run_pipeline, provider, made)
    provider.shutdown()

    trace = (await get(server, keys["read"], f"/v1/traces/{trace_id}")).json()
    records = {r["kind"]: r for r in trace["records"]}
    assert set(records) == {"retrieval", "prompt", "answer"} or len(trace["records"]) == 4
    retrievals = [r for r in trace["records"] if r["kind"] == "retrieval"]
    by_source = {r["source_uri"]: r for r in retrievals}
    assert by_source[None]["parent_ids"] == [made["chunk"].context_id]
    assert by_source[None]["attributes"]["scores"] == {made["chunk"].context_id: 0.91}
    # gen_ai.data_source.id says where the documents came from, not which snapshot served them.
    assert by_source["kb-index@2026-12-01"]["parent_ids"] == [made["other"].context_id]
    assert {r["index_snapshot"] for r in retrievals} == {None}
    answer = records["answer"]
    assert answer["produced_by"] == "gpt-test"
    # The prompt's parents are its rendered context blocks; the unknown one is not invented.
    assert records["prompt"]["parent_ids"] == [made["chunk"].context_id]
    walk = (await get(server, keys["read"], f"/v1/contexts/{answer['context_id']}/lineage")).json()
    reached = {node["context_id"] for node in walk["nodes"]}
    assert {made["chunk"].context_id, made["doc"].context_id} <= reached
    assert {u["id"] for u in trace["unknown_ids"]} == {"chunk_never_recorded", "ctx_gone"}
    gone = await get(server, keys["read"], "/v1/contexts/chunk_never_recorded")
    assert gone.status_code == 404
    # Texts are hashed, not stored: the span keeps the input's sha256 in its place.
    spans = {s["name"]: s for s in _flatten(trace["spans"])}
    stored_input = spans["retrieve"]["attributes"][SpanAttributes.INPUT_VALUE]
    assert stored_input == content_hash("how long do refunds take?")
    assert spans["llm"]["service_name"] == "rag"


def _flatten(spans: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for span in spans:
        yield span
        yield from _flatten(span["children"])


def export_request(trace_id: str, spans: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "gw"}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace_id,
                                "startTimeUnixNano": "1700000000000000000",
                                "endTimeUnixNano": "1700000000500000000",
                                "kind": 1,
                                **span,
                            }
                            for span in spans
                        ]
                    }
                ],
            }
        ]
    }


def retriever_span(span_id: str, document_id: str) -> dict[str, Any]:
    return {
        "spanId": span_id,
        "name": "retrieve",
        "attributes": [
            {"key": "openinference.span.kind", "value": {"stringValue": "RETRIEVER"}},
            {
                "key": "retrieval.documents.0.document.id",
                "value": {"stringValue": document_id},
            },
            {"key": "retrieval.documents.0.document.score", "value": {"doubleValue": 0.7}},
        ],
    }


async def post(
    server: str, key: str, body: bytes, content_type: str, **headers: str
) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server) as client:
        return await client.post(
            "/v1/traces",
            content=body,
            headers={"Authorization": f"Bearer {key}", "Content-Type": content_type, **headers},
        )


async def test_json_with_hex_ids_gzip_and_an_idempotent_replay(
    server: str, keys: dict[str, str], database: Database
) -> None:
    made = await indexed(database)
    trace_id = "5b8efff798038103d269b633813fc60c"
    body = gzip.compress(
        json.dumps(
            export_request(trace_id, [retriever_span("eee19b7ec3c1b174", made["chunk"].context_id)])
        ).encode()
    )
    first = await post(
        server, keys["ingest"], body, "application/json", **{"Content-Encoding": "gzip"}
    )
    assert first.status_code == 200, first.text
    [record_id] = first.json()["lineage"]["records"]
    assert record_id == f"otel:{trace_id}:eee19b7ec3c1b174:retrieval"
    again = await post(
        server, keys["ingest"], body, "application/json", **{"Content-Encoding": "gzip"}
    )
    assert again.status_code == 200
    assert again.json()["lineage"] == {"spans": 1, "stored": 0, "records": [], "unknown_ids": []}
    trace = (await get(server, keys["read"], f"/v1/traces/{trace_id}")).json()
    assert [r["context_id"] for r in trace["records"]] == [record_id]
    assert trace["spans"][0]["service_name"] == "gw"


async def test_another_tenants_ids_are_unknown_and_never_linked(
    server: str, keys: dict[str, str], database: Database
) -> None:
    made = await indexed(database)
    trace_id = "6b8efff798038103d269b633813fc60c"
    body = json.dumps(
        export_request(trace_id, [retriever_span("fee19b7ec3c1b174", made["chunk"].context_id)])
    ).encode()
    response = await post(server, keys["rival"], body, "application/json")
    assert response.status_code == 200
    report = response.json()
    assert report["lineage"]["records"] == []
    assert report["lineage"]["unknown_ids"] == [
        {"span_id": "fee19b7ec3c1b174", "id": made["chunk"].context_id}
    ]
    assert "not known" in report["partialSuccess"]["errorMessage"]
    assert (await get(server, keys["read"], f"/v1/traces/{trace_id}")).status_code == 404
    rival = (await get(server, keys["rival_read"], f"/v1/traces/{trace_id}")).json()
    assert rival["records"] == []
    assert rival["unknown_ids"] == report["lineage"]["unknown_ids"]


@pytest.mark.parametrize(
    ("body", "content_type", "status", "rule"),
    [
        (b"\x0a\xff\xff", "application/x-protobuf", 400, "otlp_malformed"),
        (b"{not json", "application/json", 400, "otlp_malformed"),
        (b"[]", "application/json", 400, "otlp_malformed"),
        (b"<xml/>", "text/xml", 415, None),
    ],
)
async def test_a_malformed_body_is_a_clear_4xx(
    server: str, keys: dict[str, str], body: bytes, content_type: str, status: int, rule: str | None
) -> None:
    response = await post(server, keys["ingest"], body, content_type)
    assert response.status_code == status, response.text
    if rule:
        assert response.json()["rule"] == rule


async def test_a_bad_span_refuses_the_whole_request_with_nothing_written(
    server: str, keys: dict[str, str], database: Database
) -> None:
    made = await indexed(database)
    trace_id = "7b8efff798038103d269b633813fc60c"
    good = retriever_span("aee19b7ec3c1b174", made["chunk"].context_id)
    cases = {
        "not hex": [good, {"spanId": "zz", "name": "x"}],
        "short span id": [good, {"spanId": "abcd", "name": "x"}],
        "ends before it starts": [
            good,
            {"spanId": "bee19b7ec3c1b174", "name": "x", "endTimeUnixNano": "1"},
        ],
        "time out of range": [
            good,
            {"spanId": "cee19b7ec3c1b174", "name": "x", "endTimeUnixNano": "1" + "0" * 30},
        ],
    }
    for label, spans in cases.items():
        response = await post(
            server,
            keys["ingest"],
            json.dumps(export_request(trace_id, spans)).encode(),
            "application/json",
        )
        assert response.status_code == 400, (label, response.text)
        assert response.json()["rule"] == "otlp_malformed", label
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add()
    for n in range(MAX_SPANS + 1):
        span = request.resource_spans[0].scope_spans[0].spans.add()
        span.trace_id, span.span_id, span.name = bytes.fromhex(trace_id), n.to_bytes(8), "s"
    response = await post(
        server, keys["ingest"], request.SerializeToString(), "application/x-protobuf"
    )
    assert response.status_code == 413
    assert response.json()["rule"] == "batch_too_large"
    assert (await get(server, keys["read"], f"/v1/traces/{trace_id}")).status_code == 404


async def test_non_finite_and_structured_attribute_values_are_stored_as_json(
    server: str, keys: dict[str, str]
) -> None:
    trace_id = "8b8efff798038103d269b633813fc60c"
    span = {
        "spanId": "dee19b7ec3c1b174",
        "name": "odd",
        "attributes": [
            {"key": "nan", "value": {"doubleValue": "NaN"}},
            {"key": "list", "value": {"arrayValue": {"values": [{"intValue": "3"}]}}},
            {
                "key": "map",
                "value": {"kvlistValue": {"values": [{"key": "a", "value": {"boolValue": True}}]}},
            },
            {"key": "raw", "value": {"bytesValue": "AAE="}},
        ],
    }
    response = await post(
        server,
        keys["ingest"],
        json.dumps(export_request(trace_id, [span])).encode(),
        "application/json",
    )
    assert response.status_code == 200, response.text
    [stored] = (await get(server, keys["read"], f"/v1/traces/{trace_id}")).json()["spans"]
    assert stored["attributes"] == {"nan": "nan", "list": [3], "map": {"a": True}, "raw": "AAE="}
