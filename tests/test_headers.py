"""Provenance headers: YAML front-matter and JSON envelopes for generated files."""

import asyncio
import hashlib
import json
from dataclasses import asdict, replace
from typing import Any

import httpx
import yaml
from typer.testing import CliRunner

from lineage import cli, derive
from lineage.claims.answers import record_answer, record_prompt
from lineage.core.record import format_timestamp
from lineage.db.database import Database
from lineage.interop.headers import envelope, front_matter, provenance_header
from lineage.services.demo import ANSWER_ID, TRACE_ID, load_incident
from lineage.store.postgres import PostgresStore


def fingerprint(hashes: list[str]) -> str:
    """Recomputed from the documented rule, independently of the code under test."""
    return (
        "sha256:" + hashlib.sha256("".join(h + "\n" for h in sorted(hashes)).encode()).hexdigest()
    )


async def run_cli(database_url: str, *args: str) -> str:
    # The CLI calls asyncio.run, which cannot nest in this test's loop: use a thread.
    result = await asyncio.to_thread(
        CliRunner().invoke, cli.app, list(args), env={"LINEAGE_DATABASE_URL": database_url}
    )
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


async def test_the_demo_answer_header_looks_through_its_claim(
    store: PostgresStore, database: Database
) -> None:
    contexts = {c.context_id: c for c in await load_incident(store)}
    header = await provenance_header(database, "default", ANSWER_ID)
    answer = contexts[ANSWER_ID].record
    # answer_1 <- claim_1 <- summary_1, and answer_1 <- query_1: the claim is looked through.
    assert header.consumed_ids == ["query_1", "summary_1"]
    assert header.inputs_fingerprint == fingerprint(
        [contexts["query_1"].record.content_hash, contexts["summary_1"].record.content_hash]
    )
    assert asdict(header) == {
        "context_id": ANSWER_ID,
        "trace_id": TRACE_ID,
        "operation": "answer@3",
        "provider": None,
        "model": None,
        "produced_by": "agent_a/answer@v3",
        "generated_at": format_timestamp(answer.created_at),
        "inputs_fingerprint": header.inputs_fingerprint,
        "consumed_ids": ["query_1", "summary_1"],
        # No span of its trace is stored: no layer, and nothing made up in its place.
        "request": None,
    }


async def test_an_answer_through_its_prompt_names_what_the_model_read(
    store: PostgresStore, database: Database
) -> None:
    doc = await derive(store, [], "Contractors: 14 days.", "document", source_uri="s3://p.md")
    chunk = await derive(store, [doc], "14 days", "chunk", "chunker", "2.3.1")
    other = await derive(store, [doc], "Contractors:", "chunk", "chunker", "2.3.1")
    prompt = await record_prompt(store, [chunk, other], produced_by="agent/answer@v1")
    recorded = await record_answer(
        store,
        prompt.context_id,
        {"claims": [{"text": "Contractors get 14 days.", "supported_by": [chunk.context_id]}]},
        produced_by="agent/answer@v1",
        model="model-7",
    )
    header = await provenance_header(database, "default", recorded.answer.context_id)
    # answer <- claim <- (prompt <- chunk, other) and chunk: prompt and claim are looked through.
    assert header.consumed_ids == sorted([chunk.context_id, other.context_id])
    assert header.inputs_fingerprint == fingerprint(
        [chunk.record.content_hash, other.record.content_hash]
    )
    assert header.model == "model-7"
    assert header.operation == "answer"


async def test_provider_model_and_operation_come_from_gen_ai_attributes(
    store: PostgresStore, database: Database
) -> None:
    query = await derive(store, [], "q", "query", source_uri="chat://s/1")
    answer = await derive(
        store,
        [query],
        "a",
        "answer",
        produced_by="agent/answer@v2",
        attributes={
            "gen_ai.provider.name": "anthropic",
            "gen_ai.request.model": "claude-x",
            "gen_ai.response.model": "claude-x-2026",
            "gen_ai.operation.name": "chat",
        },
    )
    header = await provenance_header(database, "default", answer.context_id)
    assert (header.provider, header.model, header.operation) == (
        "anthropic",
        "claude-x-2026",
        "chat",
    )
    assert header.consumed_ids == [query.context_id]
    assert header.trace_id is None


async def test_front_matter_and_envelope_carry_the_same_header(
    store: PostgresStore, database: Database
) -> None:
    await load_incident(store)
    header = await provenance_header(database, "default", ANSWER_ID)
    document = front_matter(header, "# Notice periods\n")
    assert document.startswith("---\nprovenance:\n")
    block, body = document.removeprefix("---\n").split("---\n", 1)
    assert body == "# Notice periods\n"
    assert yaml.safe_load(block) == {"provenance": asdict(header)}
    assert envelope(header, {"text": "30 days"}) == {
        "provenance": asdict(header),
        "content": {"text": "30 days"},
    }
    assert json.loads(json.dumps(envelope(header))) == {"provenance": asdict(header)}


async def test_the_header_endpoint_and_command(
    store: PostgresStore, client: httpx.AsyncClient, database_url: str
) -> None:
    await load_incident(store)
    as_json = await client.get(f"/v1/contexts/{ANSWER_ID}/header")
    assert as_json.status_code == 200
    provenance: dict[str, Any] = as_json.json()["provenance"]
    assert provenance["consumed_ids"] == ["query_1", "summary_1"]
    as_yaml = await client.get(f"/v1/contexts/{ANSWER_ID}/header", params={"format": "yaml"})
    assert as_yaml.headers["content-type"].startswith("application/yaml")
    assert next(yaml.safe_load_all(as_yaml.text)) == {"provenance": provenance}

    missing = await client.get("/v1/contexts/nope/header")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    wrong = await client.get(f"/v1/contexts/{ANSWER_ID}/header", params={"format": "toml"})
    assert wrong.status_code == 422

    printed = await run_cli(database_url, "export", "header", ANSWER_ID, "--format", "json")
    assert json.loads(printed) == {"provenance": provenance}
    printed = await run_cli(database_url, "export", "header", ANSWER_ID)
    assert next(yaml.safe_load_all(printed)) == {"provenance": provenance}


async def test_front_matter_round_trips_nested_layers_with_any_key(
    store: PostgresStore, database: Database
) -> None:
    await load_incident(store)
    header = await provenance_header(database, "default", ANSWER_ID)
    # Parameter names come from the spans: YAML words, spaces and colons must stay keys.
    service = {"parameters": {"on": 1, "stop sequences": ["\n", "END:"], "no": None, "x": {}}}
    nested = replace(header, request={"trace_id": TRACE_ID, "caller": {}, "service": service})
    block = front_matter(nested).split("---\n")[1]
    assert yaml.safe_load(block) == {"provenance": asdict(nested)}
