"""Hand-offs verified statement by statement (cross_source_merge), verdict precedence and
history, the verify scope, and a demo that tells both root causes and stays the same."""

from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from lineage.api.app import create_app
from lineage.claims.handoffs import (
    HandoffVerification,
    current_statement_verdicts,
    verdict_history,
    verify_command,
    verify_handoff,
)
from lineage.claims.judges import OfflineJudge
from lineage.claims.verify import claims_report, current_verdicts, mapping_resolver, verify_claims
from lineage.core.derive import derive
from lineage.core.errors import BadParameter
from lineage.db.database import Database
from lineage.services import auth, walks
from lineage.services.demo import (
    DEMO_TEXTS,
    INCIDENT,
    SUMMARY_ID,
    load_incident,
    story,
    verify_incident,
)
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore

TEXTS = {item.context_id: item.text for item in INCIDENT if item.context_id in DEMO_TEXTS}


def marks(hops: list[dict[str, object]]) -> set[tuple[object, object]]:
    return {(hop["context_id"], hop["reason"]) for hop in hops}


async def test_the_demo_summary_fuses_two_sources(
    store: PostgresStore, database: Database, settings: Settings
) -> None:
    await load_incident(store)
    checks = await verify_incident(database)
    [statement] = checks.summary.statements
    assert statement.verdict == "cross_source_merge" and statement.failing
    assert statement.merged_ids == ["chunk_17", "chunk_42"]
    assert statement.merged_sources == [
        "s3://policies/contractors.md",
        "s3://policies/employee-leave.md",
    ]
    assert statement.span == (0, len(TEXTS[SUMMARY_ID]))
    assert [c.verdict for c in checks.claim.claims] == ["supported"]
    hops = await walks.suspicious_hops(database, settings, "default", "answer_1", None)
    assert ("summary_1", "cross_source_merge") in marks(hops)
    detail = next(h["detail"] for h in hops if h["reason"] == "cross_source_merge")
    assert "chunk_17, chunk_42" in detail and "s3://policies/contractors.md" in detail


async def test_the_demo_story_names_both_root_causes_and_both_fixes(
    store: PostgresStore, database: Database, settings: Settings
) -> None:
    await load_incident(store)
    _, hops, lines = await story(database, settings)
    text = "\n".join(lines)
    assert "the claim matches its cited summary; the summary is where it went wrong" in text
    assert "A stale index" in text and "rebuild the index" in text
    assert "chunk chunk_42" in text  # what `lineage freshness` finds
    assert "A distorting hand-off" in text and "change the summariser prompt" in text
    assert "claim claim_1 (by agent_a/answer@v3)" in text  # the claims resting on the merge
    assert "Correct answer: 14 days' written notice" in text
    assert "cross_source_merge" in text
    assert ("summary_1", "cross_source_merge") in marks(hops)


async def test_commands_the_demo_suggests_do_not_change_the_next_demo(
    store: PostgresStore,
    database: Database,
    settings: Settings,
    owner: asyncpg.Connection,
) -> None:
    await load_incident(store)
    _, first_hops, first = await story(database, settings)
    # The demo captured the texts it judged: the reruns it suggests judge them the same.
    rerun = await verify_command(database, "default", "answer_1")
    assert [c.verdict for c in getattr(rerun, "claims", [])] == ["supported"]
    summary = await verify_command(database, "default", SUMMARY_ID)
    assert isinstance(summary, HandoffVerification) and not summary.unavailable
    assert [s.verdict for s in summary.statements] == ["cross_source_merge"]
    assert "\n".join(summary.lines()) in "\n".join(first)
    verdicts = await owner.fetchval("SELECT count(*) FROM provenance WHERE kind = 'verdict'")
    _, again_hops, again = await story(database, settings)
    assert again == first
    assert marks(again_hops) == marks(first_hops)
    assert await owner.fetchval("SELECT count(*) FROM provenance WHERE kind = 'verdict'") == (
        verdicts
    )


async def test_a_weaker_later_run_never_hides_a_decisive_verdict(
    store: PostgresStore, database: Database, settings: Settings
) -> None:
    doc = await derive(
        store, [], "Contractors receive 14 days' notice.", "document", source_uri="s3://c"
    )
    claim = await derive(
        store, [doc], "Contractors receive 30 days' notice.", "claim", produced_by="agent/x@v1"
    )
    judge = OfflineJudge()
    texts = mapping_resolver({doc.context_id: doc.text, claim.context_id: claim.text})
    decisive = await verify_claims(database, "default", claim.context_id, judge, texts)
    assert [c.verdict for c in decisive.claims] == ["unsupported"]
    weaker = await verify_claims(database, "default", claim.context_id, judge)
    assert [c.verdict for c in weaker.claims] == ["unknown"]
    [current] = await current_verdicts(database, "default", claim.context_id)
    assert current["verdict"] == "unsupported" and current["verdicts"] == 2
    history = await verdict_history(database, "default", [claim.context_id])
    assert [h["verdict"] for h in history] == ["unknown", "unsupported"]  # newest first
    report = await claims_report(database, settings, "default")
    assert [(r["unsupported"], r["unknown"]) for r in report] == [(1, 0)]
    hops = await walks.suspicious_hops(database, settings, "default", claim.context_id, None)
    assert (claim.context_id, "unsupported") in marks(hops)


async def test_statements_supported_unsupported_and_unknown(
    store: PostgresStore, database: Database
) -> None:
    policy = await derive(store, [], "Policy.", "document", source_uri="s3://policy")
    chunk = await derive(store, [policy], "Contractors receive 14 days' notice.", "chunk")
    other = await derive(store, [policy], "Interns get 5 days' notice.", "chunk")
    text = "Contractors receive 14 days' notice. Interns get 9 days' notice.\nThe sky is green."
    plan = await derive(store, [chunk, other], text, "reasoning", produced_by="agent/r@v2")
    resolver = mapping_resolver({c.context_id: c.text for c in (chunk, other, plan)})
    result = await verify_handoff(database, "default", plan.context_id, OfflineJudge(), resolver)
    assert [s.verdict for s in result.statements] == ["supported", "unsupported", "unknown"]
    assert [text[s.span[0] : s.span[1]] for s in result.statements] == [
        "Contractors receive 14 days' notice.",
        "Interns get 9 days' notice.",
        "The sky is green.",
    ]
    assert result.statements[0].reason.startswith(chunk.context_id)
    current = await current_statement_verdicts(database, "default", [plan.context_id])
    assert [v["verdict"] for v in current] == ["supported", "unsupported", "unknown"]
    assert [v["failing"] for v in current] == [False, True, False]
    # One parent's text missing: a statement no parent entails is unknown, not unsupported.
    partial = mapping_resolver({c.context_id: c.text for c in (chunk, plan)})
    rerun = await verify_handoff(database, "default", plan.context_id, OfflineJudge(), partial)
    assert rerun.statements[1].verdict == "unknown"
    current = await current_statement_verdicts(database, "default", [plan.context_id])
    assert current[1]["verdict"] == "unsupported" and current[1]["verdicts"] == 2
    # A text that does not hash to its record is never judged.
    forged = mapping_resolver({chunk.context_id: "anything", plan.context_id: plan.text})
    unjudged = await verify_handoff(database, "default", plan.context_id, OfflineJudge(), forged)
    assert unjudged.unavailable and not unjudged.statements
    with pytest.raises(BadParameter, match="hand-offs are"):
        await verify_handoff(database, "default", chunk.context_id, OfflineJudge(), resolver)


async def test_parents_from_one_source_fused_are_supported_not_merged(
    store: PostgresStore, database: Database
) -> None:
    doc = await derive(store, [], "policy", "document", source_uri="s3://one")
    employees = await derive(store, [doc], "Employees: 30 days' notice.", "chunk")
    contractors = await derive(store, [doc], "Contractor notice follows the employee policy.",
                               "chunk")  # fmt: skip
    summary = await derive(store, [employees, contractors], "Contractors receive 30 days' notice.",
                           "summary")  # fmt: skip
    resolver = mapping_resolver({c.context_id: c.text for c in (employees, contractors, summary)})
    [statement] = (
        await verify_handoff(database, "default", summary.context_id, OfflineJudge(), resolver)
    ).statements
    assert statement.verdict == "supported", statement.reason
    assert "together" in statement.reason and not statement.merged_ids


@pytest.fixture
async def keyed(
    database_url: str, database: Database, owner_database: Database
) -> AsyncIterator[httpx.AsyncClient]:
    await auth.create_tenant(owner_database, "acme")
    await load_incident(PostgresStore(database, "acme"))
    settings = Settings(statement_timeout_ms=5000, auth="keys", bad_request_limit=1000)
    app = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as client:
            yield client


async def bearer(database: Database, scope: str) -> dict[str, str]:
    token, _ = await auth.create_key(database, "acme", scope)
    return {"Authorization": f"Bearer {token}"}


async def test_only_a_verify_key_records_verdicts(
    keyed: httpx.AsyncClient, database: Database
) -> None:
    body = {"premise_texts": TEXTS}
    verdict = {
        "kind": "verdict", "parent_ids": ["claim_1"], "text": "forged",
        "attributes": {"check": "claim", "verdict": "supported", "judge": "offline"},
    }  # fmt: skip
    for scope, expected in (("read", 403), ("ingest", 403), ("verify", 200), ("admin", 200)):
        headers = await bearer(database, scope)
        for path in ("/v1/contexts/summary_1/verify", "/v1/answers/answer_1/verify"):
            answer = await keyed.post(path, json=body, headers=headers)
            assert answer.status_code == expected, (scope, path, answer.text)
        # No key appends a verdict record directly: only the judge path writes them.
        forged = await keyed.post("/v1/contexts", json=verdict, headers=headers)
        assert forged.status_code == (422 if scope in ("ingest", "admin") else 403), forged.text
        batch = await keyed.post("/v1/contexts/batch", json={"records": [verdict]},
                                 headers=headers)  # fmt: skip
        assert batch.status_code == (422 if scope in ("ingest", "admin") else 403), batch.text
    headers = await bearer(database, "read")
    listed = await keyed.get("/v1/contexts/summary_1/verdicts", headers=headers)
    assert listed.status_code == 200
    [current] = listed.json()["verdicts"]
    assert current["verdict"] == "cross_source_merge"
    assert current["merged_ids"] == ["chunk_17", "chunk_42"]
    assert len(listed.json()["history"]) == 2  # the verify key's run and the admin's
    verified = await keyed.post(
        "/v1/contexts/summary_1/verify", json=body, headers=await bearer(database, "verify")
    )
    assert verified.json()["statements"][0]["verdict"] == "cross_source_merge"
    claims = await keyed.get("/v1/answers/answer_1/verdicts", headers=headers)
    assert claims.json()["history"] and claims.json()["verdicts"]
    hops = await keyed.get("/v1/contexts/answer_1/suspicious", headers=headers)
    assert ("summary_1", "cross_source_merge") in marks(hops.json()["hops"])
    refused = await keyed.post(
        "/v1/contexts/chunk_42/verify", json=body, headers=await bearer(database, "verify")
    )
    assert refused.status_code == 422 and "only records a model or agent made" in refused.text


async def test_a_handoff_with_too_many_statements_is_refused_before_judging(
    store: PostgresStore, database: Database, owner: asyncpg.Connection
) -> None:
    from lineage.claims.handoffs import MAX_STATEMENTS

    doc = await derive(store, [], "Policy.", "document", source_uri="s3://p")
    text = "".join(f"Fact {i}. " for i in range(MAX_STATEMENTS + 1))
    plan = await derive(store, [doc], text, "plan")
    resolver = mapping_resolver({doc.context_id: doc.text, plan.context_id: text})
    with pytest.raises(BadParameter, match=f"at most {MAX_STATEMENTS}"):
        await verify_handoff(database, "default", plan.context_id, OfflineJudge(), resolver)
    assert await owner.fetchval("SELECT count(*) FROM provenance WHERE kind = 'verdict'") == 0
