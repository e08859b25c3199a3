"""Live sampling (a share of new answers and hand-offs verified in the background, bounded and
degrade-open) and the drift report (unsupported and merged rates per produced_by, with the
change against the previous bucket)."""

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY

from lineage.api.app import create_app
from lineage.claims.answers import capture_texts, record_prompt
from lineage.claims.drift import drift_report, drift_table
from lineage.claims.handoffs import current_statement_verdicts, verify_handoff
from lineage.claims.judges import OfflineJudge
from lineage.claims.sampling import Sampler
from lineage.claims.verify import current_verdicts, mapping_resolver, verify_claims
from lineage.core.derive import derive
from lineage.db.database import Database
from lineage.services import privacy
from lineage.services.auth import NO_AUTH_CALLER
from lineage.services.demo import load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore


def sampled(outcome: str) -> float:
    return REGISTRY.get_sample_value("lineage_sampled_total", {"outcome": outcome}) or 0.0


@pytest.fixture
async def sampling(database_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Sampler]]:
    settings = Settings(statement_timeout_ms=5000, auth="none", sample_share=1.0)
    app = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as client:
            yield client, app.state.sampler


async def test_new_answers_and_handoffs_are_verified_in_the_background(
    sampling: tuple[httpx.AsyncClient, Sampler],
    database: Database,
    store: PostgresStore,
) -> None:
    client, sampler = sampling
    await capture_texts_on(database)
    doc = await derive(store, [], "Contractors receive 14 days' notice.", "document",
                       source_uri="s3://c")  # fmt: skip
    prompt = await record_prompt(store, [doc])
    verified = sampled("verified")
    answer = await client.post(
        "/v1/answers",
        json={"prompt_id": prompt.context_id, "capture_text": True,
              "output": {"claims": [{"text": "Contractors receive 30 days' notice.",
                                     "supported_by": [doc.context_id]}]}},
    )  # fmt: skip
    assert answer.status_code == 201, answer.text
    await capture_texts(database, "default", {doc.context_id: doc.text})
    summary = await client.post(
        "/v1/contexts",
        json={"kind": "summary", "text": "Contractors receive 14 days' notice.",
              "parent_ids": [doc.context_id]},
    )  # fmt: skip
    assert summary.status_code == 201
    await capture_texts(database, "default", {summary.json()["context_id"]: doc.text})
    await sampler.drain()
    assert sampled("verified") == verified + 2
    [claim] = await current_verdicts(database, "default", answer.json()["answer_id"])
    assert claim["verdict"] in ("unsupported", "unknown")
    replay = await client.post(
        "/v1/contexts",
        json={"kind": "summary", "text": "Contractors receive 14 days' notice.",
              "parent_ids": [doc.context_id]},
    )  # fmt: skip
    assert replay.status_code in (200, 201)


async def capture_texts_on(database: Database) -> None:
    await privacy.update_settings(
        database, NO_AUTH_CALLER, dict.fromkeys(privacy.CAPTURE_SWITCHES, True)
    )


async def test_a_full_queue_drops_and_a_failure_is_counted_never_raised() -> None:
    idle = Sampler(1.0, 1, OfflineJudge, lambda: None)  # no worker: the queue stays full
    queued, dropped = sampled("queued"), sampled("dropped")
    idle.offer("default", [("a1", "answer"), ("a2", "answer"), ("d1", "document")])
    assert (sampled("queued"), sampled("dropped")) == (queued + 1, dropped + 1)

    failing = Sampler(1.0, 4, OfflineJudge, lambda: None)  # the database is not connected
    failed = sampled("failed")
    failing.start()
    failing.offer("default", [("s1", "summary")])
    await asyncio.wait_for(failing.drain(), 30)
    await failing.stop()
    assert sampled("failed") == failed + 1
    queued = sampled("queued")
    off = Sampler(0.0, 4, OfflineJudge, lambda: None)
    off.offer("default", [("a3", "answer")])
    assert sampled("queued") == queued


async def test_drift_rates_per_produced_by_with_the_change_since_the_last_bucket(
    store: PostgresStore,
    pool: asyncpg.Pool,
    database: Database,
    settings: Settings,
    client: httpx.AsyncClient,
) -> None:
    await load_incident(store)
    texts = {
        "summary_1": "Contractors are entitled to 30 days' notice, the same as employees.",
        "chunk_17": "Employees: 30 days' notice.",
        "chunk_42": "Contractor notice follows the employee policy.",
    }
    await verify_handoff(database, "default", "summary_1", OfflineJudge(), mapping_resolver(texts))
    doc = await derive(store, [], "Contractors receive 14 days' notice.", "document",
                       source_uri="s3://c")  # fmt: skip
    judge = OfflineJudge()
    for text in ("Contractors receive 30 days' notice.", "Contractors receive 14 days' notice."):
        claim = await derive(store, [doc], text, "claim", produced_by="agent_a/answer@v3")
        resolver = mapping_resolver({doc.context_id: doc.text, claim.context_id: text})
        await verify_claims(database, "default", claim.context_id, judge, resolver)
        await asyncio.sleep(1.1)  # the next claim falls in the next one-second bucket
    rows = await drift_report(database, settings, "default", bucket="1 second")
    merged = [r for r in rows if r["produced_by"] == "agent_b/summarise@v7"]
    assert [(r["judged"], r["merged"], r["merged_rate"]) for r in merged] == [(1, 1, 1.0)]
    answers = [r for r in rows if r["produced_by"] == "agent_a/answer@v3"]
    assert [(r["unsupported_rate"], r["unsupported_change"]) for r in answers] == [
        (1.0, None),
        (0.0, -1.0),
    ]
    assert any("agent_b/summarise@v7" in row for row in drift_table(rows)[1])
    over_http = await client.get("/v1/reports/drift", params={"bucket": "1 second"})
    assert over_http.status_code == 200 and len(over_http.json()["rows"]) == len(rows)
    assert (await client.get("/v1/reports/drift", params={"bucket": "1 month"})).status_code == 422
    assert await current_statement_verdicts(database, "default", ["summary_1"])
