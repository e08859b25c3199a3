"""One call per query: POST /v1/queries and record_query() record query -> retrieval -> answer in
one signed transaction; GET /v1/queries/{request_id}/trace reads it back; degrade-open."""

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY

from lineage import HttpStore, PostgresStore, derive, record_query
from lineage.api.app import create_app
from lineage.db.database import Database
from lineage.services import auth
from lineage.settings import Settings

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


async def indexed(database: Database, tenant: str = "default") -> tuple[str, str]:
    store = PostgresStore(database, tenant)
    doc = await derive(store, [], "Refunds policy", "document", "loader", "1", source_uri="kb/r")
    chunk = await derive(store, [doc], "Refunds take 14 days.", "chunk", "splitter", "1")
    return doc.context_id, chunk.context_id


def query_body(chunk: str, **fields: Any) -> dict[str, Any]:
    return {
        "request_id": "req-42",
        "query": "How long do refunds take?",
        "routing": {"decision": "hybrid", "reason": "long query"},
        "backends": ["bm25", "vector"],
        "evidence": [
            {"context_id": chunk, "score": 0.82, "backend": "vector"},
            {"context_id": "chunk_never_recorded", "score": 0.4},
        ],
        "model": "gpt-test",
        "answer": "14 days.",
        **fields,
    }


def degraded(reason: str) -> float:
    return REGISTRY.get_sample_value("lineage_degraded_total", {"reason": reason}) or 0.0


async def test_a_query_is_three_signed_records_and_walks_back_to_its_documents(
    client: httpx.AsyncClient, database: Database
) -> None:
    doc, chunk = await indexed(database)
    response = await client.post("/v1/queries", json=query_body(chunk, trace_id=TRACE))
    assert response.status_code == 201, response.text
    recorded = response.json()
    records = recorded["records"]
    assert records["retrieval"]["parent_ids"] == ["req:req-42:query", chunk]
    assert records["retrieval"]["attributes"]["scores"] == {chunk: 0.82}
    assert records["retrieval"]["attributes"]["routing"]["decision"] == "hybrid"
    assert records["retrieval"]["attributes"]["unknown_ids"] == ["chunk_never_recorded"]
    assert recorded["unknown_ids"] == ["chunk_never_recorded"]
    assert records["answer"]["produced_by"] == "gpt-test"
    assert records["query"]["content_hash"].startswith("hmacsha256:")  # keyed, never plain
    walk = (await client.get("/v1/contexts/req:req-42:answer/lineage")).json()
    assert {chunk, doc, "req:req-42:query"} <= {n["context_id"] for n in walk["nodes"]}
    assert (await client.get("/v1/contexts/chunk_never_recorded")).status_code == 404

    spans = {
        "spans": [
            {
                "trace_id": TRACE,
                "span_id": "00f067aa0ba902b7",
                "name": "gateway",
                "start_time_unix_nano": 1,
                "end_time_unix_nano": 2,
            }
        ]
    }
    assert (await client.post("/v1/spans", json=spans)).status_code == 200
    trace = (await client.get("/v1/queries/req-42/trace")).json()
    assert trace["trace_id"] == TRACE
    assert [r["kind"] for r in trace["records"]] == ["query", "retrieval", "answer"]
    assert {r["signature"]["reason"] for r in trace["records"]} == {"ok"}
    assert all(r["signature"]["verified"] for r in trace["records"])
    assert [s["name"] for s in trace["spans"]] == ["gateway"]
    assert (await client.get("/v1/queries/req-none/trace")).status_code == 404


async def test_a_replay_is_a_no_op_and_other_content_a_conflict(
    client: httpx.AsyncClient, database: Database
) -> None:
    _, chunk = await indexed(database)
    assert (await client.post("/v1/queries", json=query_body(chunk))).status_code == 201
    again = await client.post("/v1/queries", json=query_body(chunk))
    assert again.status_code == 200
    assert again.json()["created"] is False
    other = await client.post("/v1/queries", json=query_body(chunk, answer="30 days."))
    assert other.status_code == 409


async def test_the_request_trace_id_header_applies_and_bad_input_writes_nothing(
    client: httpx.AsyncClient, database: Database
) -> None:
    _, chunk = await indexed(database)
    sent = await client.post(
        "/v1/queries", json=query_body(chunk), headers={"X-Trace-Id": "gw-7f3a"}
    )
    assert sent.json()["trace_id"] == "gw-7f3a"
    bad = await client.post(
        "/v1/queries", json=query_body(chunk, request_id="req-bad", trace_id="a b")
    )
    assert bad.status_code == 422
    assert bad.json()["rule"] == "malformed_trace_id"
    assert (await client.get("/v1/queries/req-bad/trace")).status_code == 404
    both = await client.post(
        "/v1/queries",
        json=query_body(chunk, request_id="req-both", query_hash="sha256:" + "a" * 64),
    )
    assert both.status_code == 422


@pytest.fixture
async def keyed(
    database_url: str, database: Database, owner_database: Database
) -> AsyncIterator[httpx.AsyncClient]:
    for tenant in ("acme", "rival"):
        await auth.create_tenant(owner_database, tenant)
    app = create_app(Settings(auth="keys"), database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as http:
            http.headers["acme"] = (await auth.create_key(database, "acme", "admin"))[0]
            http.headers["rival"] = (await auth.create_key(database, "rival", "admin"))[0]
            yield http


async def test_another_tenants_request_ids_and_evidence_are_unknown(
    keyed: httpx.AsyncClient, database: Database
) -> None:
    _, chunk = await indexed(database, "acme")

    def bearer(tenant: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {keyed.headers[tenant]}"}

    mine = await keyed.post("/v1/queries", json=query_body(chunk), headers=bearer("acme"))
    assert mine.status_code == 201
    foreign = await keyed.get("/v1/queries/req-42/trace", headers=bearer("rival"))
    absent = await keyed.get("/v1/queries/req-43/trace", headers=bearer("rival"))
    assert foreign.status_code == absent.status_code == 404
    assert foreign.json()["detail"].replace("42", "N") == absent.json()["detail"].replace("43", "N")
    theirs = await keyed.post("/v1/queries", json=query_body(chunk), headers=bearer("rival"))
    assert theirs.status_code == 201  # the same request id is the rival's own
    assert theirs.json()["unknown_ids"] == [chunk, "chunk_never_recorded"]
    assert theirs.json()["records"]["retrieval"]["parent_ids"] == ["req:req-42:query"]


async def test_record_query_in_the_sdk_writes_directly_or_over_http_and_degrades_open(
    client: httpx.AsyncClient, database: Database
) -> None:
    _, chunk = await indexed(database)
    direct = await record_query(
        PostgresStore(database), "req-direct", query="q", answer="a", evidence=[(chunk, 0.5)]
    )
    assert direct is not None
    assert direct["records"]["retrieval"]["parent_ids"] == ["req:req-direct:query", chunk]
    over_http = await record_query(
        HttpStore("http://lineage", client=client),
        "req-http",
        query_hash="sha256:" + "b" * 64,
        answer="a",
        evidence=[chunk],
        model="m",
    )
    assert over_http is not None
    assert over_http["records"]["answer"]["produced_by"] == "m"

    before = degraded("query_not_recorded")
    down = HttpStore("http://127.0.0.1:9", timeout_s=0.5)
    try:
        assert await record_query(down, "req-down", query="q", answer="a") is None
    finally:
        await down.aclose()
    assert await record_query(PostgresStore(database), "req-bad", answer="a") is None  # no query
    conflicting = await record_query(
        PostgresStore(database), "req-direct", query="other", answer="a"
    )
    assert conflicting is None
    assert degraded("query_not_recorded") == before + 3
