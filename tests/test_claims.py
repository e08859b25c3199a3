"""Claims: prompts, answer ingestion in every citation shape, verification, verdicts, drift."""

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from lineage.claims.answers import (
    capture_texts,
    claim_hypothesis,
    in_prompt,
    parse_output,
    record_answer,
    record_prompt,
)
from lineage.claims.handoffs import verify_command
from lineage.claims.judges import Judgement, OfflineJudge
from lineage.claims.verify import (
    ClaimsVerification,
    claims_report,
    current_verdicts,
    ensure_verified,
    report_table,
    verify_claims,
)
from lineage.core.derive import Context, derive, render_for_prompt
from lineage.core.errors import BadParameter, InvalidRecord, NotFound
from lineage.db.database import Database
from lineage.db.named_sql import SQL_DIR
from lineage.services import privacy, walks
from lineage.services.auth import NO_AUTH_CALLER
from lineage.services.demo import INCIDENT, load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.psql import run_psql

EMPLOYEES = "Employees receive 30 days' notice."
CONTRACTORS = "Contractors receive 14 days' written notice before termination."
INTERNS = "Interns receive 5 days' notice."
DEMO_TEXTS = ("summary_1", "claim_1")


@dataclass
class ExactJudge:
    """Deterministic: entailed when the premise holds the claim word for word, not_entailed when
    the claim has a figure the premise lacks, else unknown."""

    name: str = "exact"
    version: str = "1"

    async def judge(self, premise: str, hypothesis: str) -> Judgement:
        claim = hypothesis.rstrip(".").lower()
        if claim in premise.lower():
            return Judgement("entailed", "word for word", self.name, self.version)
        figures = [w for w in claim.split() if w.isdigit() and w not in premise]
        if figures:
            return Judgement("not_entailed", f"{figures} not in premise", self.name, self.version)
        return Judgement("unknown", "cannot tell", self.name, self.version)


@dataclass
class Pipeline:
    chunks: dict[str, Context]
    prompt: Context
    outside: Context  # in this tenant, but not in the prompt


@pytest.fixture
def api(client: httpx.AsyncClient) -> httpx.AsyncClient:
    return client


@pytest.fixture
async def capturing(database: Database) -> None:
    """Text capture is off by default: these tests opt in for every class of text."""
    await privacy.update_settings(
        database, NO_AUTH_CALLER, dict.fromkeys(privacy.CAPTURE_SWITCHES, True)
    )


@pytest.fixture
async def pipeline(store: PostgresStore, database: Database, capturing: None) -> Pipeline:
    """Two chunks in a prompt (employees first), a third chunk left out; texts captured."""
    chunks = {}
    for name, text in (
        ("employees", EMPLOYEES),
        ("contractors", CONTRACTORS),
        ("interns", INTERNS),
    ):
        doc = await derive(store, [], text, "document", "loader", "1", source_uri=f"s3://{name}")
        chunks[name] = await derive(store, [doc], text, "chunk", "chunker", "2.3.1")
    await capture_texts(database, "default", {c.context_id: c.text for c in chunks.values()})
    prompt = await record_prompt(
        store, [chunks["employees"], chunks["contractors"]], "agent_a/answer@v3", "trace_1"
    )
    return Pipeline(chunks, prompt, chunks["interns"])


async def other_tenant_id(owner: asyncpg.Connection, database: Database) -> str:
    await owner.execute("INSERT INTO tenants (tenant_id) VALUES ('other')")
    foreign = await derive(
        PostgresStore(database, "other"), [],
        "Secret: contractors get 90 days.", "document",
        source_uri="s3://other/secret", context_id="secret_doc",
    )  # fmt: skip
    return foreign.context_id


async def provenance_rows(owner: asyncpg.Connection, kind: str) -> list[dict[str, Any]]:
    """Rows as the owner sees them (no jsonb codec on this connection: decode attributes)."""
    rows = await owner.fetch(
        "SELECT * FROM provenance WHERE kind = $1 ORDER BY created_at, context_id", kind
    )
    return [dict(row) | {"attributes": json.loads(row["attributes"])} for row in rows]


# --- 1. the prompt -----------------------------------------------------------------------------


async def test_prompt_parents_are_exactly_the_rendered_contexts(pipeline: Pipeline) -> None:
    shown = [pipeline.chunks["employees"], pipeline.chunks["contractors"]]
    assert pipeline.prompt.text == render_for_prompt(shown)
    assert pipeline.prompt.parent_ids == [c.context_id for c in shown]
    assert pipeline.prompt.record.kind == "prompt"
    assert in_prompt(pipeline.prompt.record, shown[1].context_id)
    assert not in_prompt(pipeline.prompt.record, pipeline.outside.context_id)


# --- 2. the demo incident ----------------------------------------------------------------------


@pytest.mark.usefixtures("capturing")
async def test_demo_claim_passes_entailment_yet_its_walk_back_exposes_chunk_42(
    store: PostgresStore,
    pool: asyncpg.Pool,
    database: Database,
    settings: Settings,
    api: httpx.AsyncClient,
) -> None:
    await load_incident(store)
    texts = {name: next(i.text for i in INCIDENT if i.context_id == name) for name in DEMO_TEXTS}
    assert set(await capture_texts(database, "default", texts)) == set(texts)
    assert await capture_texts(database, "default", texts) == []  # captured once, kept

    offline = await verify_claims(database, "default", "answer_1", OfflineJudge())
    [verdict] = offline.claims
    assert verdict.claim_id == "claim_1" and verdict.cited_ids == ["summary_1"]
    # The claim matches its summary; the error lies further back, at chunk_42.
    assert verdict.verdict == "supported", verdict
    assert not verdict.failing

    class Entails:
        name, version = "entails", "1"

        async def judge(self, premise: str, hypothesis: str) -> Judgement:
            assert premise == texts["summary_1"] and hypothesis == texts["claim_1"]
            return Judgement("entailed", "same figure", self.name, self.version)

    passed = await verify_claims(database, "default", "answer_1", Entails())
    assert [c.verdict for c in passed.claims] == ["supported"]
    link = passed.as_dict()["claims"][0]["lineage"]
    assert link == "/v1/contexts/claim_1/lineage"
    walk = (await api.get(link)).json()
    assert {"chunk_42", "doc_contractors_v1"} <= {node["context_id"] for node in walk["nodes"]}
    hops = await walks.suspicious_hops(database, settings, "default", "claim_1", None)
    assert ("chunk_42", "old_transform_version") in {(h["context_id"], h["reason"]) for h in hops}
    assert "claim_1" in "\n".join(passed.lines())


@pytest.mark.usefixtures("capturing")
async def test_ensure_verified_replays_the_current_verdicts(
    store: PostgresStore, database: Database, owner: asyncpg.Connection
) -> None:
    """What the demo runs: a second run shows the same verdict and appends nothing."""
    await load_incident(store)
    texts = {name: next(i.text for i in INCIDENT if i.context_id == name) for name in DEMO_TEXTS}
    await capture_texts(database, "default", texts)
    first = await ensure_verified(database, "default", "answer_1", OfflineJudge())
    again = await ensure_verified(database, "default", "answer_1", OfflineJudge())
    assert again.as_dict() == first.as_dict()
    assert len(await provenance_rows(owner, "verdict")) == 1
    newer = ExactJudge(version="2")
    await ensure_verified(database, "default", "answer_1", newer)
    await ensure_verified(database, "default", "answer_1", newer)
    assert len(await provenance_rows(owner, "verdict")) == 2
    await ensure_verified(database, "default", "answer_1", ExactJudge(version="3"))
    assert len(await provenance_rows(owner, "verdict")) == 3


# --- 3. ingestion: hallucinated, foreign, uncited, out-of-prompt ids -----------------------------


async def test_invented_foreign_and_uncited_claims(
    pipeline: Pipeline,
    database: Database,
    owner: asyncpg.Connection,
    api: httpx.AsyncClient,
) -> None:
    foreign = await other_tenant_id(owner, database)
    employees, contractors = pipeline.chunks["employees"], pipeline.chunks["contractors"]
    output = {
        "claims": [
            {"text": CONTRACTORS, "supported_by": [contractors.context_id]},
            {
                "text": "Contractors receive 30 days' notice.",
                "supported_by": [contractors.context_id],
            },
            {"text": "Contractors get 90 days.", "supported_by": ["ctx_invented"]},
            {"text": "Contractors get 90 days!", "supported_by": [foreign]},
            {"text": INTERNS, "supported_by": [pipeline.outside.context_id]},
            {"text": "Notice is always given.", "supported_by": []},
            {"text": EMPLOYEES, "supported_by": [employees.context_id, "ctx_invented"]},
        ]
    }
    response = await api.post(
        "/v1/answers",
        json={"prompt_id": pipeline.prompt.context_id, "output": output,
              "produced_by": "agent_a/answer@v3", "model": "m-1"},
    )  # fmt: skip
    assert response.status_code == 201, response.text
    body = response.json()
    claims = body["claims"]
    assert [c["not_in_prompt"] for c in claims] == [
        [], [], ["ctx_invented"], [foreign], [pipeline.outside.context_id], [], ["ctx_invented"],
    ]  # fmt: skip
    # An invented id and another tenant's id get the same answer: nothing leaks.
    invented, foreign_claim = claims[2], claims[3]
    assert invented.keys() == foreign_claim.keys()
    assert invented["in_prompt"] == foreign_claim["in_prompt"] == []

    rows = {r["context_id"]: r for r in await provenance_rows(owner, "claim")}
    prompt_id = pipeline.prompt.context_id
    assert rows[claims[0]["claim_id"]]["parent_ids"] == [prompt_id, contractors.context_id]
    assert rows[claims[2]["claim_id"]]["parent_ids"] == [prompt_id]
    assert rows[claims[3]["claim_id"]]["parent_ids"] == [prompt_id]
    assert rows[claims[3]["claim_id"]]["attributes"]["cited_ids"] == [foreign]
    assert rows[claims[6]["claim_id"]]["parent_ids"] == [prompt_id, employees.context_id]
    [answer] = await provenance_rows(owner, "answer")
    assert answer["context_id"] == body["answer_id"]
    assert answer["parent_ids"] == [c["claim_id"] for c in claims]
    # Hashes only: no claim text anywhere in provenance, none captured without opting in.
    dump = json.dumps([dict(r) for r in await owner.fetch("SELECT * FROM provenance")], default=str)
    assert "90 days" not in dump and "always given" not in dump
    captured = {r["context_id"] for r in await owner.fetch("SELECT context_id FROM context_text")}
    assert not captured & set(rows)

    verified = await api.post(
        f"/v1/answers/{body['answer_id']}/verify",
        json={
            "claim_texts": {
                c["claim_id"]: t["text"] for c, t in zip(claims, output["claims"], strict=True)
            }
        },
    )
    assert verified.status_code == 200, verified.text
    result = verified.json()
    assert [c["verdict"] for c in result["claims"]] == [
        "supported", "unsupported", "hallucinated_id", "hallucinated_id", "hallucinated_id",
        "uncited", "hallucinated_id",
    ]  # fmt: skip
    assert result["counts"] == {
        "uncited": 1, "hallucinated_id": 4, "unsupported": 1, "supported": 1, "unknown": 0,
    }  # fmt: skip
    assert result["claims"][3]["hallucinated_ids"] == [foreign]
    for claim in result["claims"]:
        assert claim["failing"] == (claim["verdict"] != "supported")
        walk = await api.get(claim["lineage"])
        assert walk.status_code == 200
        assert prompt_id in {node["context_id"] for node in walk.json()["nodes"]}


async def test_unknown_prompt_is_404_and_bad_output_is_422(
    pipeline: Pipeline, store: PostgresStore, api: httpx.AsyncClient
) -> None:
    missing = await api.post(
        "/v1/answers", json={"prompt_id": "ctx_nope", "output": {"claims": []}}
    )
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("application/problem+json")
    with pytest.raises(NotFound):
        await record_answer(store, "ctx_nope", {"claims": []})
    not_prompt = await api.post(
        "/v1/answers",
        json={"prompt_id": pipeline.outside.context_id, "output": {"claims": []}},
    )
    assert not_prompt.status_code == 422 and "not a prompt" in not_prompt.json()["detail"]
    shapeless = await api.post(
        "/v1/answers", json={"prompt_id": pipeline.prompt.context_id, "output": {"x": 1}}
    )
    assert shapeless.status_code == 422
    # No claims ("I don't know"): the answer hangs from the prompt.
    empty = await record_answer(store, pipeline.prompt.context_id, {"text": "I don't know"})
    assert len(empty.claims) == 1 and empty.claims[0].cited_ids == []
    none = await record_answer(store, pipeline.prompt.context_id, {"claims": []})
    assert none.answer.parent_ids == [pipeline.prompt.context_id]


# --- 4. citation shapes ------------------------------------------------------------------------


async def test_inline_markers_in_answer_text_and_claims(
    pipeline: Pipeline, store: PostgresStore, database: Database
) -> None:
    employees, contractors = pipeline.chunks["employees"], pipeline.chunks["contractors"]
    text = (
        "Contractors receive 14 days' written notice before termination"
        f" [{contractors.context_id}]."
        f" Employees receive 30 days' notice. [{employees.context_id}]\n"
        f"- Interns receive 5 days' notice [ctx_made_up, {employees.context_id}].\n"
        "Nobody checked this."
    )
    recorded = await record_answer(
        store, pipeline.prompt.context_id, {"text": text}, "agent_a/answer@v3", capture_text=True
    )
    assert [c.cited_ids for c in recorded.claims] == [
        [contractors.context_id],
        [employees.context_id],
        ["ctx_made_up", employees.context_id],
        [],
    ]
    assert recorded.claims[2].in_prompt == [employees.context_id]
    assert recorded.answer.text == text
    assert claim_hypothesis(recorded.claims[0].text) == CONTRACTORS
    result = await verify_claims(database, "default", recorded.answer.context_id, ExactJudge())
    assert [c.verdict for c in result.claims] == [
        "supported", "supported", "hallucinated_id", "uncited",
    ]  # fmt: skip
    # Markers inside a claims list count as well.
    parsed = parse_output(
        {"claims": [{"text": f"Employees receive 30 days [{employees.context_id}]."}]},
        pipeline.prompt.parent_ids,
    )
    assert parsed.claims[0].cited_ids == [employees.context_id]


async def test_anthropic_citations_map_document_index_to_prompt_order(
    pipeline: Pipeline,
    store: PostgresStore,
    pool: asyncpg.Pool,
    database: Database,
    owner: asyncpg.Connection,
) -> None:
    employees, contractors = pipeline.chunks["employees"], pipeline.chunks["contractors"]
    output = {
        "content": [
            {"type": "text", "text": "Based on the documents, "},
            {
                "type": "text",
                "text": "contractors receive 14 days' written notice before termination.",
                "citations": [
                    {"type": "char_location", "cited_text": CONTRACTORS, "document_index": 1,
                     "document_title": None, "start_char_index": 0, "end_char_index": 64},
                ],
            },
            {"type": "text", "text": " Employees receive 30 days' notice.",
             "citations": [{"type": "char_location", "cited_text": EMPLOYEES,
                            "document_index": 0, "start_char_index": 0, "end_char_index": 34}]},
            {"type": "text", "text": " Interns receive 5 days' notice.",
             "citations": [{"type": "page_location", "cited_text": "x", "document_index": 7,
                            "start_page_number": 1, "end_page_number": 2}]},
        ]
    }  # fmt: skip
    recorded = await record_answer(
        store, pipeline.prompt.context_id, output, "agent_a/answer@v3", capture_text=True
    )
    assert [c.cited_ids for c in recorded.claims] == [
        [contractors.context_id], [employees.context_id], ["document_index=7"],
    ]  # fmt: skip
    rows = {r["context_id"]: r for r in await provenance_rows(owner, "claim")}
    row = rows[recorded.claims[0].claim_id]
    assert row["parent_ids"] == [pipeline.prompt.context_id, contractors.context_id]
    [citation] = row["attributes"]["citations"]
    assert citation == {
        "type": "char_location", "document_index": 1, "context_id": contractors.context_id,
        "start_char_index": 0, "end_char_index": 64,
    }  # fmt: skip
    assert "cited_text" not in json.dumps(row["attributes"])
    result = await verify_claims(database, "default", recorded.answer.context_id, ExactJudge())
    assert [c.verdict for c in result.claims] == ["unknown", "supported", "hallucinated_id"]
    assert "Based on the documents" in recorded.claims[0].text


async def test_openai_file_citations_by_context_id_or_mapping(
    pipeline: Pipeline, store: PostgresStore, database: Database
) -> None:
    employees, contractors = pipeline.chunks["employees"], pipeline.chunks["contractors"]
    text = f"{CONTRACTORS} {EMPLOYEES} {INTERNS}"
    first_end, second_end = len(CONTRACTORS), len(CONTRACTORS) + 1 + len(EMPLOYEES)
    output = {
        "output": [
            {"type": "reasoning", "summary": []},
            {
                "type": "message",
                "content": [{
                    "type": "output_text",
                    "text": text,
                    "annotations": [
                        {"type": "file_citation", "index": first_end, "file_id": "file-abc",
                         "filename": "contractors.md"},
                        {"type": "file_citation", "index": second_end,
                         "file_id": employees.context_id, "filename": "employees.md"},
                        {"type": "file_citation", "index": len(text), "file_id": "file-zzz"},
                        {"type": "url_citation", "start_index": 0, "end_index": 3,
                         "url": "https://example.com"},
                    ],
                }],
            },
        ]
    }  # fmt: skip
    recorded = await record_answer(
        store, pipeline.prompt.context_id, output, "agent_b@v1",
        file_ids={"file-abc": contractors.context_id}, capture_text=True,
    )  # fmt: skip
    assert [c.cited_ids for c in recorded.claims] == [
        [contractors.context_id], [employees.context_id], ["file-zzz"],
    ]  # fmt: skip
    assert recorded.ignored_citations == 1
    # The Assistants shape nests file_id; claims may carry these citations directly.
    nested = parse_output(
        {"claims": [{"text": EMPLOYEES, "citations": [
            {"type": "file_citation", "file_citation": {"file_id": "file-abc"}}]}]},
        pipeline.prompt.parent_ids, {"file-abc": contractors.context_id},
    )  # fmt: skip
    assert nested.claims[0].cited_ids == [contractors.context_id]
    result = await verify_claims(database, "default", recorded.answer.context_id, ExactJudge())
    assert [c.verdict for c in result.claims] == ["supported", "supported", "hallucinated_id"]
    with pytest.raises(BadParameter, match="offset"):
        parse_output({"text": "x.", "citations": [{"context_id": "a"}]}, [])


# --- 5. verification texts ---------------------------------------------------------------------


async def test_texts_come_from_resolver_or_caller_never_provenance(
    pipeline: Pipeline,
    store: PostgresStore,
    database: Database,
    owner: asyncpg.Connection,
) -> None:
    employees, contractors = pipeline.chunks["employees"], pipeline.chunks["contractors"]
    foreign = await other_tenant_id(owner, database)
    recorded = await record_answer(
        store,
        pipeline.prompt.context_id,
        {"claims": [
            {"text": EMPLOYEES, "supported_by": [employees.context_id]},
            {"text": CONTRACTORS, "supported_by": [contractors.context_id, foreign]},
            {"text": CONTRACTORS, "supported_by": [contractors.context_id]},
        ]},
    )  # fmt: skip
    answer_id = recorded.answer.context_id
    # Claim texts were not captured: unknown, not failing.
    blind = await verify_claims(database, "default", answer_id, ExactJudge())
    assert [c.verdict for c in blind.claims] == ["unknown", "hallucinated_id", "unknown"]
    assert "claim text unavailable" in blind.claims[0].reason

    asked: list[list[str]] = []

    def resolver(ids: Sequence[str]) -> dict[str, str]:
        asked.append(list(ids))
        texts = {employees.context_id: "Employees receive 10 days' notice."}  # not as recorded
        return texts | {contractors.context_id: CONTRACTORS}

    claim_texts = {c.claim_id: c.text for c in recorded.claims}
    result = await verify_claims(
        database, "default", answer_id, ExactJudge(), resolver, claim_texts=claim_texts
    )
    # A premise that does not hash to its record is unavailable, never judged.
    assert [c.verdict for c in result.claims] == ["unknown", "hallucinated_id", "supported"]
    # Only ids that were in the prompt are ever resolved: never the foreign one.
    assert all(foreign not in ids for ids in asked)
    with pytest.raises(BadParameter, match="content_hash"):
        await verify_claims(database, "default", answer_id, ExactJudge(),
            claim_texts={recorded.claims[0].claim_id: "Something else."},
        )  # fmt: skip
    with pytest.raises(InvalidRecord, match="text_hash_mismatch"):
        await capture_texts(database, "default", {employees.context_id: "Not the text."})
    with pytest.raises(NotFound):
        await verify_claims(database, "default", "ctx_missing", ExactJudge())
    with pytest.raises(BadParameter, match="verify an answer or a claim"):
        await verify_claims(database, "default", employees.context_id, ExactJudge())
    # One claim can be verified on its own.
    alone = await verify_claims(
        database, "default", recorded.claims[2].claim_id, ExactJudge(), resolver,
        claim_texts={recorded.claims[2].claim_id: CONTRACTORS},
    )  # fmt: skip
    assert [c.verdict for c in alone.claims] == ["supported"]


async def test_verify_over_http_with_texts_in_the_request(
    pipeline: Pipeline, api: httpx.AsyncClient
) -> None:
    employees = pipeline.chunks["employees"]
    posted = await api.post(
        "/v1/answers",
        json={"prompt_id": pipeline.prompt.context_id, "answer_id": "answer_http",
              "output": {"claims": [{"text": EMPLOYEES, "supported_by": [employees.context_id]}]}},
    )  # fmt: skip
    assert posted.status_code == 201
    replay = await api.post(
        "/v1/answers",
        json={"prompt_id": pipeline.prompt.context_id, "answer_id": "answer_http",
              "output": {"claims": [{"text": EMPLOYEES, "supported_by": [employees.context_id]}]}},
    )  # fmt: skip
    assert replay.status_code == 200 and replay.json()["claims"] == posted.json()["claims"]
    [claim] = posted.json()["claims"]
    verified = await api.post(
        "/v1/answers/answer_http/verify",
        json={"claim_texts": {claim["claim_id"]: EMPLOYEES},
              "premise_texts": {employees.context_id: EMPLOYEES}},
    )  # fmt: skip
    assert verified.status_code == 200, verified.text
    [result] = verified.json()["claims"]
    # The server's default judge is the rule-based OfflineJudge.
    assert result["judge"] == "offline"
    assert result["verdict"] in {"supported", "unknown"}
    wrong = await api.post(
        "/v1/answers/answer_http/verify", json={"claim_texts": {claim["claim_id"]: "nope"}}
    )
    assert wrong.status_code == 422
    assert (await api.post("/v1/answers/ctx_nope/verify")).status_code == 404


async def test_claims_recorded_with_derive_cite_their_parents(
    pipeline: Pipeline, store: PostgresStore, database: Database
) -> None:
    contractors = pipeline.chunks["contractors"]
    claim = await derive(store, [pipeline.prompt, contractors], CONTRACTORS, "claim")
    bare = await derive(store, [pipeline.prompt], "Nothing cited.", "claim")
    answer = await derive(store, [claim, bare], "answer", "answer")
    result = await verify_claims(database, "default", answer.context_id, ExactJudge(),
        claim_texts={claim.context_id: claim.text, bare.context_id: bare.text},
    )  # fmt: skip
    assert [(c.cited_ids, c.verdict) for c in result.claims] == [
        ([contractors.context_id], "supported"), ([], "uncited"),
    ]  # fmt: skip
    # A marker alone on its line belongs to the sentence above it.
    parsed = parse_output({"text": "Employees get 30 days\n[a, b]\nNext."}, ["a", "b"])
    assert [(c.text, c.cited_ids) for c in parsed.claims] == [
        ("Employees get 30 days\n[a, b]", ["a", "b"]), ("Next.", []),
    ]  # fmt: skip


# --- 6. verdicts are records -------------------------------------------------------------------


async def test_verdicts_are_appended_never_updated(
    pipeline: Pipeline, store: PostgresStore, database: Database, owner: asyncpg.Connection,
    api: httpx.AsyncClient,
) -> None:  # fmt: skip
    employees = pipeline.chunks["employees"]
    recorded = await record_answer(
        store,
        pipeline.prompt.context_id,
        {"claims": [{"text": EMPLOYEES, "supported_by": [employees.context_id]},
                    {"text": "No source.", "supported_by": []}]},
    )  # fmt: skip
    answer_id = recorded.answer.context_id
    first = await verify_claims(database, "default", answer_id, ExactJudge())
    assert [c.verdict for c in first.claims] == ["unknown", "uncited"]
    before = {r["context_id"]: dict(r) for r in await provenance_rows(owner, "verdict")}
    assert len(before) == 2

    await capture_texts(database, "default", {c.claim_id: c.text for c in recorded.claims})
    second = await verify_claims(database, "default", answer_id, ExactJudge())
    assert [c.verdict for c in second.claims] == ["supported", "uncited"]
    after = {r["context_id"]: dict(r) for r in await provenance_rows(owner, "verdict")}
    assert len(after) == 4
    assert all(after[i] == row for i, row in before.items())  # old verdicts untouched
    verdict = after[second.claims[0].verdict_id]
    assert verdict["parent_ids"] == [recorded.claims[0].claim_id]
    assert verdict["transform_version"] == "verify_claims@1"
    assert {k: verdict["attributes"][k] for k in ("verdict", "judge", "judge_version")} == {
        "verdict": "supported", "judge": "exact", "judge_version": "1",
    }  # fmt: skip
    assert verdict["attributes"]["reason"]
    with pytest.raises(asyncpg.PostgresError, match="append-only"):
        await owner.execute("UPDATE provenance SET attributes = '{}' WHERE kind = 'verdict'")

    current = await current_verdicts(database, "default", answer_id)
    assert [(v["claim_id"], v["verdict"], v["verdicts"]) for v in current] == sorted(
        [(recorded.claims[0].claim_id, "supported", 2), (recorded.claims[1].claim_id, "uncited", 2)]
    )
    assert {v["context_id"] for v in current} == {c.verdict_id for c in second.claims}
    # A second judge has its own current verdict per claim.
    await verify_claims(database, "default", recorded.claims[0].claim_id, OfflineJudge())
    judges = {
        (v["claim_id"], v["judge"]) for v in await current_verdicts(database, "default", answer_id)
    }
    assert (recorded.claims[0].claim_id, "offline") in judges and len(judges) == 3
    listed = (await api.get(f"/v1/answers/{answer_id}/verdicts")).json()["verdicts"]
    assert len(listed) == 3


# --- 7. the drift report -----------------------------------------------------------------------


async def test_report_failing_rates_by_produced_by_from_current_verdicts(
    pipeline: Pipeline, store: PostgresStore, database: Database, settings: Settings,
    api: httpx.AsyncClient,
) -> None:  # fmt: skip
    employees, contractors = pipeline.chunks["employees"], pipeline.chunks["contractors"]
    good = {"text": EMPLOYEES, "supported_by": [employees.context_id]}
    wrong = {
        "text": "Contractors receive 30 days' notice.",
        "supported_by": [contractors.context_id],
    }
    invented = {"text": "Interns get 3 days.", "supported_by": ["ctx_invented"]}
    uncited = {"text": "Trust me.", "supported_by": []}
    answers = {
        "agent_a/answer@v3": [good, good, good, wrong],
        "agent_b/answer@v4": [good, invented, uncited, wrong],
    }
    for produced_by, claims in answers.items():
        recorded = await record_answer(
            store, pipeline.prompt.context_id, {"claims": claims}, produced_by, capture_text=True
        )
        for _ in range(2):  # re-verifying must not count twice
            await verify_claims(database, "default", recorded.answer.context_id, ExactJudge())

    rows = await claims_report(
        database, settings, "default", since=datetime.now(UTC) - timedelta(hours=1)
    )
    assert len({row["bucket_start"] for row in rows}) == 1
    got = {row["produced_by"]: row for row in rows}
    assert set(got) == set(answers)
    a, b = got["agent_a/answer@v3"], got["agent_b/answer@v4"]
    assert (a["claims"], a["failing"], a["failing_rate"], a["unsupported"]) == (4, 1, 0.25, 1)
    assert (b["claims"], b["failing"], b["failing_rate"]) == (4, 3, 0.75)
    assert (b["hallucinated_id"], b["uncited"], b["unsupported"], b["supported"]) == (1, 1, 1, 1)
    assert a["judge"] == "exact"
    assert any("agent_b/answer@v4" in row for row in report_table(rows)[1])

    over_http = await api.get(
        "/v1/reports/claims",
        params={"since": (datetime.now(UTC) - timedelta(hours=1)).isoformat(),
                "group_by": "produced_by", "bucket": "1 hour"},
    )  # fmt: skip
    assert over_http.status_code == 200, over_http.text
    assert {r["produced_by"]: r["failing"] for r in over_http.json()["rows"]} == {
        "agent_a/answer@v3": 1, "agent_b/answer@v4": 3,
    }  # fmt: skip
    as_text = await claims_report(
        database, settings, "default", since="2020-01-01", bucket="7 days"
    )
    assert sum(row["claims"] for row in as_text) == 8
    with pytest.raises(BadParameter, match="ISO 8601"):
        await claims_report(database, settings, "default", since="last tuesday")
    future = await claims_report(
        database, settings, "default", since=datetime.now(UTC) + timedelta(days=1)
    )
    assert future == []
    for params in ({"bucket": "1 month"}, {"bucket": "1 day; drop"}, {"group_by": "model"}):
        assert (await api.get("/v1/reports/claims", params=params)).status_code == 422


async def test_verify_command_uses_captured_texts(
    pipeline: Pipeline, store: PostgresStore, database: Database
) -> None:
    contractors = pipeline.chunks["contractors"]
    recorded = await record_answer(
        store,
        pipeline.prompt.context_id,
        {"claims": [{"text": CONTRACTORS, "supported_by": [contractors.context_id]},
                    {"text": "Contractors receive 30 days' notice.",
                     "supported_by": [contractors.context_id]}]},
        capture_text=True,
    )  # fmt: skip
    result = await verify_command(database, "default", recorded.answer.context_id)
    assert isinstance(result, ClaimsVerification)
    assert result.judge == "offline"
    # Word for word is entailed and a different figure is not, for any sensible judge.
    assert [c.verdict for c in result.claims] == ["supported", "unsupported"], result.lines()
    assert "walk back: lineage walk" in "\n".join(result.lines())


# --- 8. the SQL files run under psql as they are --------------------------------------------


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
@pytest.mark.usefixtures("capturing")
async def test_claim_sql_files_run_under_psql(
    database_url: str, store: PostgresStore, database: Database
) -> None:
    await load_incident(store)
    await capture_texts(database, "default", {"summary_1": INCIDENT[8].text})
    await verify_claims(database, "default", "answer_1", ExactJudge())
    variables = {
        "claim_capture_text": ["context_ids={summary_1}", "texts={x}"],
        "claim_text": ["context_ids={summary_1,claim_1}"],
        "claim_verdicts": ["context_ids={claim_1}"],
        "claims_by_produced_by": ["since=-infinity", "bucket=1 day"],
    }
    outputs = {}
    for name, extra in variables.items():
        given = dict(value.split("=", 1) for value in extra)
        outputs[name] = await run_psql(
            database_url, SQL_DIR / f"{name}.sql", {"tenant_id": "default", **given}
        )
    assert "(0 rows)" in outputs["claim_capture_text"]  # captured already: kept as it was
    assert "summary_1" in outputs["claim_text"]
    assert (
        "claim_1" in outputs["claim_verdicts"]
        and "agent_a/answer@v3" in outputs["claims_by_produced_by"]
    )
