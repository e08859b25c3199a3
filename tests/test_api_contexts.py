"""The HTTP API for records: append, replay, conflict, batch, read, walk-back, bad input."""

import asyncio
from typing import Any

import asyncpg
import httpx
import pytest

from lineage.core.hashing import content_hash
from lineage.core.record import MAX_ATTRIBUTES_BYTES, MAX_ATTRIBUTES_DEPTH, MAX_PARENTS
from tests.test_record import nested

DOC = {"kind": "document", "source_uri": "s3://policies/a.md", "text": "Policy A"}


async def count(owner: asyncpg.Connection) -> int:
    total: int = await owner.fetchval("SELECT count(*) FROM provenance")
    return total


def assert_problem(response: httpx.Response, status: int, *words: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    for word in words:
        assert word in body["detail"] or word == body.get("rule"), body
    return body


async def test_append_then_replay_then_conflict(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/contexts", json=DOC | {"context_id": "doc_a"})
    assert created.status_code == 201
    record = created.json()
    assert record["context_id"] == "doc_a"
    assert record["content_hash"] == content_hash("Policy A")
    assert "text" not in record and record["created_at"].endswith("Z")
    replay = await client.post("/v1/contexts", json=DOC | {"context_id": "doc_a"})
    assert replay.status_code == 200
    assert replay.json() == record
    by_hash = await client.post(
        "/v1/contexts",
        json={
            "context_id": "doc_a",
            "kind": "document",
            "source_uri": "s3://policies/a.md",
            "content_hash": content_hash("Policy A"),
        },
    )
    assert by_hash.status_code == 200
    conflict = await client.post("/v1/contexts", json=DOC | {"context_id": "doc_a", "text": "B"})
    assert_problem(conflict, 409, "already exists")
    fetched = await client.get("/v1/contexts/doc_a")
    assert fetched.json() == record


async def test_generated_id_and_walk_back(client: httpx.AsyncClient) -> None:
    doc = (await client.post("/v1/contexts", json=DOC)).json()
    assert doc["context_id"].startswith("ctx_")
    chunk = (
        await client.post(
            "/v1/contexts",
            json={
                "kind": "chunk",
                "parent_ids": [doc["context_id"]],
                "text": "A, part 1",
                "transform": "chunker",
                "transform_version": "chunker@2.3.1",
            },
        )
    ).json()
    lineage = (await client.get(f"/v1/contexts/{chunk['context_id']}/lineage")).json()
    depths = {node["context_id"]: node["depth"] for node in lineage["nodes"]}
    assert depths == {chunk["context_id"]: 0, doc["context_id"]: 1}
    assert lineage["edges"] == [{"child": chunk["context_id"], "parent": doc["context_id"]}]
    assert lineage["truncated"] is False


async def test_batch_is_all_or_nothing(
    client: httpx.AsyncClient, owner: asyncpg.Connection
) -> None:
    records = [
        DOC | {"context_id": "doc_b"},
        {"kind": "chunk", "parent_ids": ["doc_b"], "text": "b1", "context_id": "chunk_b1"},
    ]
    first = await client.post("/v1/contexts/batch", json={"records": records})
    assert first.status_code == 201
    assert [r["created"] for r in first.json()["results"]] == [True, True]
    replay = await client.post("/v1/contexts/batch", json={"records": records})
    assert replay.status_code == 200
    assert [r["created"] for r in replay.json()["results"]] == [False, False]
    broken = [*records, {"kind": "chunk", "parent_ids": ["ghost"], "text": "x"}]
    assert_problem(
        await client.post("/v1/contexts/batch", json={"records": broken}), 422, "unknown_parent"
    )
    assert await count(owner) == 2


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        ({"kind": "chunk", "parent_ids": ["ghost"], "text": "x"}, "unknown_parent"),
        ({"kind": "chunk", "text": "x"}, "missing_parents"),
        ({"kind": "thing", "source_uri": "s3://x", "text": "x"}, "unknown_kind"),
        (DOC | {"context_id": "no spaces allowed"}, "malformed_id"),
        (DOC | {"content_hash": content_hash("x")}, "hash_or_text"),
        ({"kind": "document", "source_uri": "s3://x"}, "hash_or_text"),
        (DOC | {"attributes": {"x": "y" * MAX_ATTRIBUTES_BYTES}}, "attributes_too_large"),
        (DOC | {"attributes": {"x": nested(MAX_ATTRIBUTES_DEPTH)}}, "attributes_too_deep"),
        (
            {"kind": "chunk", "text": "x", "parent_ids": [f"p{i}" for i in range(MAX_PARENTS + 1)]},
            "too_many_parents",
        ),
        (DOC | {"colour": "red"}, "bad_request"),
        (DOC | {"attributes": ["k", "v"]}, "bad_request"),  # attributes are a JSON object
        ({"kind": "document"}, "hash_or_text"),
    ],
)
async def test_bad_input_is_refused_with_a_reason_and_nothing_written(
    client: httpx.AsyncClient, owner: asyncpg.Connection, body: dict[str, Any], rule: str
) -> None:
    response = await client.post("/v1/contexts", json=body)
    problem = assert_problem(response, 422)
    assert problem["rule"] == rule
    assert await count(owner) == 0


async def test_oversized_body_is_refused(
    client: httpx.AsyncClient, owner: asyncpg.Connection
) -> None:
    huge = DOC | {"text": "x" * (9 * 1024 * 1024)}
    assert_problem(await client.post("/v1/contexts", json=huge), 413, "split")
    assert await count(owner) == 0


async def test_unknown_ids_are_404_problems(client: httpx.AsyncClient) -> None:
    for path in ("/v1/contexts/ctx_nope", "/v1/contexts/ctx_nope/lineage"):
        assert_problem(await client.get(path), 404, "ctx_nope")


async def test_health_and_docs(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = (await client.get("/readyz")).json()
    assert ready["status"] == "ready" and ready["postgres"] >= 15
    assert (await client.get("/docs")).status_code == 200
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert {"/v1/contexts", "/v1/contexts/batch", "/v1/contexts/{context_id}/lineage"} <= set(paths)


# --- single appends arriving together (lineage.services.coalesce) ------------------------------

CONCURRENT = 12  # under the cap on requests in flight (16), past which they are shed


async def test_single_appends_that_arrive_together_share_a_transaction(
    client: httpx.AsyncClient, owner: asyncpg.Connection
) -> None:
    sent = [DOC | {"context_id": f"doc_{i}", "text": f"Policy {i}"} for i in range(CONCURRENT)]
    answers = await asyncio.gather(*(client.post("/v1/contexts", json=doc) for doc in sent))
    assert [a.status_code for a in answers] == [201] * CONCURRENT
    assert [a.json()["context_id"] for a in answers] == [doc["context_id"] for doc in sent]
    assert await count(owner) == CONCURRENT
    # One transaction stamps its records with one time: fewer times than records, fewer
    # transactions. Each record is signed and queued for the log as a batch's would be.
    times = await owner.fetchval("SELECT count(DISTINCT created_at) FROM provenance")
    assert times < CONCURRENT
    signed = "SELECT count(*) FROM provenance WHERE signature IS NOT NULL"
    assert await owner.fetchval(signed) == CONCURRENT
    assert await owner.fetchval("SELECT count(*) FROM events") == CONCURRENT  # the log's queue
    replays = await asyncio.gather(*(client.post("/v1/contexts", json=doc) for doc in sent))
    assert [r.json() for r in replays] == [a.json() for a in answers]
    assert {r.status_code for r in replays} == {200}


async def test_a_bad_single_append_among_others_refuses_only_its_own_request(
    client: httpx.AsyncClient, owner: asyncpg.Connection
) -> None:
    assert (await client.post("/v1/contexts", json=DOC | {"context_id": "doc_a"})).status_code
    sent: list[dict[str, Any]] = [
        {"kind": "chunk", "text": f"clause {i}", "parent_ids": ["doc_a"]} for i in range(10)
    ]
    sent[3] = {"kind": "chunk", "text": "orphan", "parent_ids": ["doc_missing"]}
    sent[6] = DOC | {"context_id": "doc_a", "text": "other content"}  # a conflicting replay
    sent[8] = sent[7] = {"kind": "chunk", "text": "twice", "context_id": "chunk_twice",
                         "parent_ids": ["doc_a"]}  # fmt: skip
    answers = await asyncio.gather(*(client.post("/v1/contexts", json=doc) for doc in sent))
    statuses = [a.status_code for a in answers]
    assert statuses[3] == 422 and "doc_missing" in answers[3].text
    assert_problem(answers[6], 409, "already exists")
    assert sorted(statuses[7:9]) == [200, 201]  # the same record twice: one made, one replay
    assert [s for i, s in enumerate(statuses) if i not in {3, 6, 7, 8}] == [201] * 6
    assert await count(owner) == 1 + 6 + 1
    assert not await owner.fetchval("SELECT count(*) FROM provenance WHERE source_uri IS NULL "
                                    "AND parent_ids = '{doc_missing}'")  # fmt: skip
