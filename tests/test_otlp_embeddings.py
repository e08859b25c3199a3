"""Embedding migrations from the spans a pipeline already emits: OpenInference EMBEDDING and
GenAI `embeddings` spans, sent by the real OpenTelemetry SDK through its OTLP/HTTP exporter,
record which model embedded each chunk; the CLI, the API and the psql file then answer which
answers depend on chunks that model embedded."""

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openinference.semconv.trace import (
    DocumentAttributes,
    EmbeddingAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from typer.testing import CliRunner

from lineage import derive
from lineage.api.app import create_app
from lineage.cli import app
from lineage.db.database import Database
from lineage.db.named_sql import SQL_DIR
from lineage.services import auth
from lineage.settings import Settings
from lineage.store import PostgresStore
from tests.live_server import serve
from tests.psql import run_psql

TENANT = "acme"
OLD_MODEL = "text-embedding-ada-002"
NEW_MODEL = "text-embedding-3-small"
CHUNKS = {
    "kb/refunds.md": "Refunds take 14 days and are paid back to the card.",
    "kb/shipping.md": "Shipping is free for orders over 50 euros.",
}


@pytest.fixture
def server(database_url: str) -> Iterator[str]:
    settings = Settings(statement_timeout_ms=5000, auth="keys")
    with serve(create_app(settings, database_url=database_url)) as url:
        yield url


@pytest.fixture
async def keys(database: Database, owner_database: Database) -> dict[str, str]:
    await auth.create_tenant(owner_database, TENANT)
    return {
        "ingest": (await auth.create_key(database, TENANT, "ingest"))[0],
        "read": (await auth.create_key(database, TENANT, "read"))[0],
    }


def exporting(server: str, key: str) -> TracerProvider:
    exporter = OTLPSpanExporter(
        endpoint=f"{server}/v1/traces", headers={"Authorization": f"Bearer {key}"}
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "rag"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def index_and_ask(provider: TracerProvider, chunk_ids: dict[str, str]) -> None:
    """Embed the refunds chunk with the old model (OpenInference) and the shipping chunk with the
    new one (GenAI), then ask one question of each: spans only, no lineage code."""
    tracer = provider.get_tracer("rag")
    embeddings = SpanAttributes.EMBEDDING_EMBEDDINGS
    with tracer.start_as_current_span("embed") as embed:
        embed.set_attribute(
            SpanAttributes.OPENINFERENCE_SPAN_KIND, OpenInferenceSpanKindValues.EMBEDDING.value
        )
        embed.set_attribute(SpanAttributes.EMBEDDING_MODEL_NAME, OLD_MODEL)
        embed.set_attribute(
            f"{embeddings}.0.{EmbeddingAttributes.EMBEDDING_TEXT}", CHUNKS["kb/refunds.md"]
        )
        embed.set_attribute(f"{embeddings}.0.{EmbeddingAttributes.EMBEDDING_VECTOR}", [0.1] * 4)
    with tracer.start_as_current_span("embeddings text-embedding-3-small") as embed:
        embed.set_attribute(gen_ai_attributes.GEN_AI_OPERATION_NAME, "embeddings")
        embed.set_attribute(gen_ai_attributes.GEN_AI_REQUEST_MODEL, NEW_MODEL)
        embed.set_attribute(gen_ai_attributes.GEN_AI_EMBEDDINGS_DIMENSION_COUNT, 1536)
        embed.set_attribute(
            gen_ai_attributes.GEN_AI_INPUT_MESSAGES, json.dumps([CHUNKS["kb/shipping.md"]])
        )
    for uri in CHUNKS:
        with tracer.start_as_current_span("query"):
            with tracer.start_as_current_span("retrieve") as retrieve:
                retrieve.set_attribute(SpanAttributes.OPENINFERENCE_SPAN_KIND, "RETRIEVER")
                prefix = f"{SpanAttributes.RETRIEVAL_DOCUMENTS}.0."
                retrieve.set_attribute(prefix + DocumentAttributes.DOCUMENT_ID, chunk_ids[uri])
                retrieve.set_attribute(prefix + DocumentAttributes.DOCUMENT_SCORE, 0.8)
            with tracer.start_as_current_span("llm") as llm:
                llm.set_attribute(SpanAttributes.OPENINFERENCE_SPAN_KIND, "LLM")
                llm.set_attribute(SpanAttributes.LLM_MODEL_NAME, "gpt-test")
                llm.set_attribute("llm.input_messages.0.message.content", f"About {uri}?")
                llm.set_attribute("llm.output_messages.0.message.content", f"As {uri} says.")


async def answers_by_chunk(server: str, key: str, chunk_ids: dict[str, str]) -> dict[str, str]:
    """Each answer's id, by the source URI of the chunk it walks back to."""
    found: dict[str, str] = {}
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=server, headers=headers) as client:
        listed = await client.get("/v1/contexts", params={"kind": "answer"})
        for answer in listed.json()["records"]:
            walk = await client.get(f"/v1/contexts/{answer['context_id']}/lineage")
            reached = {node["context_id"] for node in walk.json()["nodes"]}
            [uri] = [uri for uri, chunk in chunk_ids.items() if chunk in reached]
            found[uri] = answer["context_id"]
    return found


async def test_impact_by_embedding_model_lists_the_answers_on_chunks_it_embedded(
    server: str, keys: dict[str, str], database: Database, database_url: str
) -> None:
    store = PostgresStore(database, TENANT)
    chunk_ids: dict[str, str] = {}
    for uri, text in CHUNKS.items():
        doc = await derive(store, [], f"# {uri}\n{text}", "document", "loader", "1", source_uri=uri)
        chunk_ids[uri] = (await derive(store, [doc], text, "chunk", "splitter", "1")).context_id
    provider = exporting(server, keys["ingest"])
    await asyncio.to_thread(index_and_ask, provider, chunk_ids)
    provider.shutdown()
    answers = await answers_by_chunk(server, keys["read"], chunk_ids)
    expected = {OLD_MODEL: [answers["kb/refunds.md"]], NEW_MODEL: [answers["kb/shipping.md"]]}

    headers = {"Authorization": f"Bearer {keys['read']}"}
    env = {"LINEAGE_DATABASE_URL": database_url}
    for model, wanted in expected.items():
        async with httpx.AsyncClient(base_url=server, headers=headers) as client:
            asked = {"embedding_model": model, "kind": "answer"}
            response = await client.get("/v1/impact", params=asked)
        assert response.status_code == 200, response.text
        assert [n["context_id"] for n in response.json()["nodes"]] == wanted, model

        cli = ["impact", "--embedding-model", model, "--kind", "answer", "--format", "ndjson"]
        result = await asyncio.to_thread(
            CliRunner().invoke, app, [*cli, "--tenant", TENANT], env=env
        )
        assert result.exit_code == 0, result.output
        *rows, _summary = (json.loads(line) for line in result.stdout.splitlines())
        assert [row["context_id"] for row in rows] == wanted, model

        # The ids alone, as a re-embedding job downloads them.
        async with httpx.AsyncClient(base_url=server, headers=headers) as client:
            ids = await client.get("/v1/impact/ids", params={**asked, "format": "csv"})
        assert ids.status_code == 200, ids.text
        header, *lines = ids.text.splitlines()
        assert header == "context_id,kind,depth,truncated"
        assert [line.split(",")[0] for line in lines] == wanted, model

        variables = {"embedding_model": model, "kind": "answer", "max_depth": "20"}
        for name in ("invalidate_by_embedding_model", "invalidate_ids_by_embedding_model"):
            printed = await run_psql(
                database_url, SQL_DIR / f"{name}.sql", {"tenant_id": TENANT, **variables}, "-At"
            )
            assert [line.split("|")[0] for line in printed.splitlines()] == wanted, (name, model)

    # The embedding records: one per chunk, its model as transform version and maker.
    async with httpx.AsyncClient(base_url=server, headers=headers) as client:
        listed = await client.get("/v1/contexts", params={"kind": "embedding"})
    made: dict[str, Any] = {r["parent_ids"][0]: r for r in listed.json()["records"]}
    old, new = made[chunk_ids["kb/refunds.md"]], made[chunk_ids["kb/shipping.md"]]
    assert (old["transform_version"], old["produced_by"]) == (f"embedding@{OLD_MODEL}", OLD_MODEL)
    assert old["attributes"]["dimensions"] == 4
    assert (new["transform_version"], new["attributes"]["dimensions"]) == (
        f"embedding@{NEW_MODEL}",
        1536,
    )
