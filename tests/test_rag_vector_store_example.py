"""examples/rag_vector_store.py runs as a user would run it: into pgvector on a PostgreSQL 18 of
its own (the shared test server has no `vector` extension) and into Qdrant's local mode, given
only a live keyed server's URL and an ingest key (its chunks through SyncLineage over HTTP, its
spans through the OTLP exporter). Then, with the real stores: each answer's header nests its LLM
call's provider, model, parameters and backend request id, each answer walks back to its chunks
and documents, `lineage impact --embedding-model` lists exactly the answers
on that model's chunks, and `lineage forget` of one document deletes exactly its chunks'
vectors from both stores, with a receipt that verifies."""

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from qdrant_client import AsyncQdrantClient
from typer.testing import CliRunner

from lineage import cli
from lineage.api.app import create_app
from lineage.core import DEFAULT_TENANT
from lineage.db.database import Database
from lineage.services import auth
from lineage.settings import Settings
from tests.live_server import serve
from tests.private_postgres import PrivatePostgres, private_postgres

pytestmark = [
    pytest.mark.slow,
    # The OpenInference instrumentation touches deprecated APIs of LlamaIndex.
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "rag_vector_store.py"
TRACE = re.compile(r"^trace ([0-9a-f]{32}): ", re.MULTILINE)
FORGOTTEN, KEPT = "kb/refunds.md", {"kb/shipping.md", "kb/returns.md"}
PG_MODEL, QDRANT_MODEL = "hash-embed-1", "hash-embed-2"


@pytest.fixture(scope="module")
def pgvector_server() -> Iterator[PrivatePostgres]:
    with private_postgres() as server:
        yield server


@pytest.fixture
def registry(tmp_path: Path, pgvector_server: PrivatePostgres) -> Path:
    """The stores as the example fills them: pgvector's `node_id` column, Qdrant's `context_id`
    payload field."""
    path = tmp_path / "vector-stores.toml"
    path.write_text(
        f"""
[[store]]
tenant = "default"
name = "pg"
kind = "pgvector"
dsn = "{pgvector_server.url}"
table = "public.data_chunks"
id_column = "node_id"

[[store]]
tenant = "default"
name = "qdrant"
kind = "qdrant"
path = "{tmp_path / "qdrant"}"
collection = "chunks"
id_field = "context_id"
"""
    )
    path.chmod(0o600)
    return path


@pytest.fixture
def server(database_url: str, registry: Path) -> Iterator[str]:
    settings = Settings(auth="keys", vector_stores_file=registry)
    with serve(create_app(settings, database_url=database_url)) as url:
        yield url


def run_example(env: dict[str, str], *args: str) -> str:
    finished = subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    [trace_id] = TRACE.findall(finished.stdout)
    return str(trace_id)


async def in_pgvector(url: str) -> set[str]:
    connection = await asyncpg.connect(url)
    try:
        return {row[0] for row in await connection.fetch("SELECT node_id FROM data_chunks")}
    finally:
        await connection.close()


async def in_qdrant(path: Path) -> set[str]:
    client = AsyncQdrantClient(path=str(path))
    try:
        points, _ = await client.scroll("chunks", limit=1000, with_payload=True)
    finally:
        await client.close()
    return {(point.payload or {})["context_id"] for point in points}


def assert_the_layers_name_the_llm_call(header: dict[str, Any], trace_id: str) -> None:
    """The answer's request, its LLM call as OpenInference recorded it (model and LLMMetadata
    as parameters), and under it the fake LLM's GenAI client span (provider, response id)."""
    request = header["request"]
    assert (request["trace_id"], request["operation"]) == (trace_id, "question")
    assert request["caller"] == {"service": "rag-example"}
    service = request["service"]
    assert (service["provider"], service["model"]) == ("extractive", "extractive-1")
    assert (header["provider"], header["model"]) == ("extractive", "extractive-1")
    assert service["parameters"] == {"context_window": 2048, "num_output": 64}
    assert service["attempts"] == 1
    [transport] = service["transport"]
    assert re.fullmatch(r"cmpl-[0-9a-f]{24}", transport["request_id"]), transport
    assert transport["sdk"] == "extractive-sdk@1.0.0"


def lineage_cli(env: dict[str, str], *args: str) -> str:
    result = CliRunner().invoke(cli.app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


async def test_the_rag_example_is_walked_back_invalidated_and_forgotten_in_both_stores(
    server: str,
    database: Database,
    database_url: str,
    registry: Path,
    pgvector_server: PrivatePostgres,
) -> None:
    # The pipeline has the service's URL and an ingest key: no database, no signing keys.
    ingest_key, _ = await auth.create_key(database, DEFAULT_TENANT, "ingest")
    read_key, _ = await auth.create_key(database, DEFAULT_TENANT, "read")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LINEAGE_", "OTEL_"))}
    env |= {
        "LINEAGE_URL": server,
        "LINEAGE_API_KEY": ingest_key,
        "LINEAGE_DATA_DIR": str(registry.parent / "pipeline"),  # its spool
    }
    qdrant_path = registry.parent / "qdrant"
    traces = {
        PG_MODEL: await asyncio.to_thread(run_example, env, "pgvector", pgvector_server.url),
        QDRANT_MODEL: await asyncio.to_thread(
            run_example, env, "qdrant", str(qdrant_path), "--embedding-model", QDRANT_MODEL
        ),
    }

    answers: dict[str, str] = {}
    walked_chunks: dict[str, set[str]] = {}
    chunks_of: dict[str, set[str]] = {}
    bearer = {"Authorization": f"Bearer {read_key}"}
    async with httpx.AsyncClient(base_url=server, headers=bearer) as client:
        for model, trace_id in traces.items():
            recorded = (await client.get(f"/v1/traces/{trace_id}")).json()["records"]
            [answer] = [r["context_id"] for r in recorded if r["kind"] == "answer"]
            header = (await client.get(f"/v1/contexts/{answer}/header")).json()["provenance"]
            assert_the_layers_name_the_llm_call(header, trace_id)
            walk = (await client.get(f"/v1/contexts/{answer}/lineage")).json()["nodes"]
            kinds = {node["kind"] for node in walk}
            assert {"answer", "prompt", "retrieval", "chunk", "document"} <= kinds, model
            assert FORGOTTEN in {n["source_uri"] for n in walk if n["kind"] == "document"}
            answers[model] = answer
            walked_chunks[model] = {n["context_id"] for n in walk if n["kind"] == "chunk"}
        for uri in (FORGOTTEN, *KEPT):
            found = await client.get("/v1/impact", params={"source_uri": uri, "kind": "chunk"})
            chunks_of[uri] = {node["context_id"] for node in found.json()["nodes"]}

    # Each run split each document into its two sentences, and stored each chunk's vector
    # under the chunk's lineage id; each answer walks back to chunks of its own store.
    pg_before = await in_pgvector(pgvector_server.url)
    qdrant_before = await in_qdrant(qdrant_path)
    assert len(pg_before) == len(qdrant_before) == 6
    assert pg_before | qdrant_before == set().union(*chunks_of.values())
    assert [len(chunks_of[uri] & pg_before) for uri in chunks_of] == [2, 2, 2]
    assert [len(chunks_of[uri] & qdrant_before) for uri in chunks_of] == [2, 2, 2]
    assert walked_chunks[PG_MODEL] and walked_chunks[PG_MODEL] <= pg_before
    assert walked_chunks[QDRANT_MODEL] and walked_chunks[QDRANT_MODEL] <= qdrant_before

    cli_env = {"LINEAGE_DATABASE_URL": database_url, "LINEAGE_VECTOR_STORES_FILE": str(registry)}
    for model, answer in answers.items():
        listed = await asyncio.to_thread(
            lineage_cli, cli_env, "impact", "--embedding-model", model, "--kind", "answer",
            "--format", "ndjson",
        )  # fmt: skip
        *rows, _summary = (json.loads(line) for line in listed.splitlines())
        assert [row["context_id"] for row in rows] == [answer], model

    receipt = registry.parent / "forgotten.json"
    await asyncio.to_thread(
        lineage_cli, cli_env, "forget", "--source-uri", FORGOTTEN, "--output", str(receipt)
    )
    forgotten = json.loads(receipt.read_text())
    assert forgotten["complete"] is True
    assert [(r["store"], r["status"], r["remaining"]) for r in forgotten["vector_stores"]] == [
        ("pg", "deleted", []),
        ("qdrant", "deleted", []),
    ]
    assert await in_pgvector(pgvector_server.url) == pg_before - chunks_of[FORGOTTEN]
    assert await in_qdrant(qdrant_path) == qdrant_before - chunks_of[FORGOTTEN]
    assert forgotten["tombstone_ids"]
    for tombstone in forgotten["tombstone_ids"]:
        verified = await asyncio.to_thread(
            lineage_cli, cli_env, "verify-record", tombstone, "--format", "json"
        )
        checked = json.loads(verified)
        assert checked["verified"] is True, checked
