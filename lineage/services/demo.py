"""The demo incident: "What notice period do contractors get?" was answered "30 days".

The claim cites a summary made from chunk_17 (employee policy: 30 days) and chunk_42 (the
contractor policy's old cross-reference to the employee policy). chunk_42 was cut by
chunker@1.4 into index snapshot idx_2026_08_01; the contractor policy has since been revised
to an explicit 14 days. Its walk-back shows both root causes: the stale index, and the summary
that fused the two chunks into a "fact" about contractors (a cross_source_merge).
"""

from dataclasses import dataclass
from typing import Any

from lineage.claims.handoffs import (
    HandoffVerification,
    StatementVerdict,
    current_statement_verdicts,
    verify_handoff,
)
from lineage.claims.judges import OfflineJudge
from lineage.claims.verify import ClaimsVerification, ensure_verified
from lineage.core import DEFAULT_TENANT, telemetry
from lineage.core.derive import Context, Derivation, derive_many
from lineage.core.store import Store
from lineage.db.database import Database
from lineage.services import privacy, reads, walks
from lineage.services.auth import Caller
from lineage.settings import Settings

ANSWER_ID = "answer_1"
SUMMARY_ID = "summary_1"
CORRECT_ANSWER = "14 days' written notice before termination"
CORRECTED_BY = "doc_contractors_v2"
# The texts the demo's checks read, captured as a pipeline would so `lineage verify` reads them.
DEMO_TEXTS = ("summary_1", "claim_1", "chunk_17", "chunk_42")
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
INGEST_TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
EMPLOYEE_POLICY = "s3://policies/employee-leave.md"
CONTRACTOR_POLICY = "s3://policies/contractors.md"

INCIDENT = [
    Derivation(
        [],
        "Employee leave policy.\nEmployees: 30 days' notice.",
        "document",
        "loader",
        "1.2.0",
        source_uri=EMPLOYEE_POLICY,
        context_id="doc_employee_leave_v1",
    ),
    Derivation(
        [],
        "Contractor policy.\nContractor notice follows the employee policy.",
        "document",
        "loader",
        "1.2.0",
        source_uri=CONTRACTOR_POLICY,
        context_id="doc_contractors_v1",
    ),
    Derivation(
        ["doc_contractors_v1"],
        "Contractor notice follows the employee policy.",
        "chunk",
        "chunker",
        "1.4",
        index_snapshot="idx_2026_08_01",
        context_id="chunk_42",
        attributes={"char_start": 19, "char_end": 66},
    ),
    Derivation(
        [],
        "Contractor policy (revised).\nContractors receive 14 days' written notice before "
        "termination.",
        "document",
        "loader",
        "1.2.0",
        source_uri=CONTRACTOR_POLICY,
        context_id="doc_contractors_v2",
    ),
    Derivation(
        ["doc_employee_leave_v1"],
        "Employees: 30 days' notice.",
        "chunk",
        "chunker",
        "2.3.1",
        index_snapshot="idx_2026_09_15",
        context_id="chunk_17",
        attributes={"char_start": 23, "char_end": 50},
    ),
    Derivation(
        ["doc_contractors_v2"],
        "Contractors receive 14 days' written notice before termination.",
        "chunk",
        "chunker",
        "2.3.1",
        index_snapshot="idx_2026_09_15",
        context_id="chunk_58",
        attributes={"char_start": 29, "char_end": 94},
    ),
    Derivation(
        [],
        "What notice period do contractors get?",
        "query",
        source_uri="chat://session/7f3a",
        trace_id=TRACE_ID,
        context_id="query_1",
    ),
    Derivation(
        ["query_1", "chunk_17", "chunk_42"],
        "chunk_17\nchunk_42",
        "retrieval",
        "retriever",
        "0.9.0",
        index_snapshot="idx_2026_08_01",
        trace_id=TRACE_ID,
        context_id="retrieval_1",
        attributes={"top_k": 2, "scores": [0.91, 0.88]},
    ),
    Derivation(
        ["chunk_17", "chunk_42"],
        "Contractors are entitled to 30 days' notice, the same as employees.",
        "summary",
        "summarise",
        "7",
        produced_by="agent_b/summarise@v7",
        trace_id=TRACE_ID,
        context_id="summary_1",
        attributes={"model": "demo-model"},
    ),
    Derivation(
        ["summary_1"],
        "Contractors are entitled to 30 days' notice.",
        "claim",
        "answer",
        "3",
        produced_by="agent_a/answer@v3",
        trace_id=TRACE_ID,
        context_id="claim_1",
        attributes={"supported_by": ["summary_1"]},
    ),
    Derivation(
        ["claim_1", "query_1"],
        "30 days",
        "answer",
        "answer",
        "3",
        produced_by="agent_a/answer@v3",
        trace_id=TRACE_ID,
        context_id=ANSWER_ID,
    ),
]


async def load_incident(store: Store) -> list[Context]:
    """Idempotent: every id is fixed, so a second run replays and writes nothing new.

    One call per record, as a pipeline would make them, so each gets its own time. Records
    without a trace id of their own carry the fixed ingest trace, not the run's new one.
    """
    with telemetry.trace_context(INGEST_TRACE_ID):
        return [(await derive_many(store, [item]))[0] for item in INCIDENT]


@dataclass(frozen=True)
class IncidentChecks:
    claim: ClaimsVerification
    summary: HandoffVerification


def _text(context_id: str) -> str:
    return next(item.text for item in INCIDENT if item.context_id == context_id)


async def keep_texts(database: Database, tenant_id: str = DEFAULT_TENANT) -> list[str]:
    """Capture the texts the demo's checks read, so that `lineage verify` judges them again as
    the demo did. Capture is opt-in: the switches it needs are turned on (audited) first. The
    switches it turned on; a rerun captures nothing new and turns nothing on."""
    kinds = {item.context_id: item.kind for item in INCIDENT if item.context_id in DEMO_TEXTS}
    switches = await privacy.get_settings(database, tenant_id)
    off = sorted({privacy.capture_switch(kind) for kind in kinds.values()} - {
        switch for switch in privacy.CAPTURE_SWITCHES if getattr(switches, switch)
    })  # fmt: skip
    if off:
        demo = Caller(tenant_id, None, "admin")
        await privacy.update_settings(database, demo, dict.fromkeys(off, True))
    async with database.tenant(tenant_id) as tx:
        await privacy.capture(tx, {name: _text(name) for name in DEMO_TEXTS}, kinds)
    return off


async def verify_incident(database: Database, tenant_id: str = DEFAULT_TENANT) -> IncidentChecks:
    """Judge the claim against its summary and the summary against its chunks, with the texts
    `keep_texts` captured. Each check runs once: a rerun finds the offline judge's verdicts and
    appends nothing, so every demo shows the same (and so does `lineage verify`)."""
    await keep_texts(database, tenant_id)
    judge = OfflineJudge()
    claim = await ensure_verified(database, tenant_id, ANSWER_ID, judge)
    current = await current_statement_verdicts(database, tenant_id, [SUMMARY_ID])
    mine = [v for v in current if v["judge"] == judge.name and v["judge_version"] == judge.version]
    if not mine:
        return IncidentChecks(claim, await verify_handoff(database, tenant_id, SUMMARY_ID, judge))
    summary = next(item for item in INCIDENT if item.context_id == SUMMARY_ID)
    statements = [
        StatementVerdict(
            int(v["statement"]), (int(v["span"][0]), int(v["span"][1])), v["verdict"],
            v["reason"], list(v["merged_ids"] or []), list(v["merged_sources"] or []),
            v["context_id"],
        )
        for v in mine
    ]  # fmt: skip
    return IncidentChecks(
        claim,
        HandoffVerification(
            SUMMARY_ID,
            "summary",
            judge.name,
            judge.version,
            [str(p) for p in summary.parents],
            statements,
            text=summary.text,
        ),
    )


async def story(
    database: Database, settings: Settings, tenant_id: str = DEFAULT_TENANT
) -> tuple[walks.Walk, list[dict[str, Any]], list[str]]:
    """The incident told whole: its walk-back and marks, then the two checks, the two root
    causes and their fixes, as lines for the terminal. Loading and checks are idempotent."""
    checks = await verify_incident(database, tenant_id)
    walk = await walks.walk_back(database, settings, tenant_id, ANSWER_ID, None)
    hops = await walks.suspicious_hops(database, settings, tenant_id, ANSWER_ID, None)
    depth = walks.check_depth(settings, None)
    stale = await reads.run(
        database, settings, "stale_sources", tenant_id=tenant_id, source_uri="any", kind="any",
        max_depth=depth,
    )  # fmt: skip
    merged_at = [s for s in checks.summary.statements if s.verdict == "cross_source_merge"]
    resting = await reads.run(
        database, settings, "blast_radius", tenant_id=tenant_id, context_ids=[SUMMARY_ID],
        kind="claim", max_depth=depth,
    ) if merged_at else []  # fmt: skip
    lines = [
        "",
        f"Claim check (lineage verify {ANSWER_ID}): the claim matches its cited summary; "
        "the summary is where it went wrong.",
        *checks.claim.lines(),
        "",
        f"Hand-off check (lineage verify {SUMMARY_ID}): each statement of the summary against "
        "the chunks it was made from.",
        *checks.summary.lines(),
        "",
        "Root causes",
        "  1. A stale index: chunk_42 was cut by chunker@1.4 into snapshot idx_2026_08_01 before "
        "the contractor policy was revised; the retriever still served its old cross-reference "
        '("Contractor notice follows the employee policy").',
        "     Fix: rebuild the index from the current revisions. `lineage freshness` finds "
        f"{len(stale)} records made from a superseded revision:",
        *(f"       {n['kind']} {n['context_id']}" for n in stale),
        f"  2. A distorting hand-off: {SUMMARY_ID} (agent_b/summarise@v7) fused chunk_17 "
        "(employee policy) with chunk_42 (contractor policy) and stated the result as a fact "
        "about contractors: " + (
            "; ".join(f"{', '.join(s.merged_ids)} from {', '.join(s.merged_sources)}"
                      for s in merged_at) or "not found this run"
        ) + ".",
        "     Fix: change the summariser prompt (never carry one group's terms to another "
        "without saying so) and add this case to its evals. Claims that rest on merged "
        "statements:",
        *(f"       claim {n['context_id']} (by {n['produced_by']})" for n in resting),
        "",
        f"Correct answer: {CORRECT_ANSWER} ({CORRECTED_BY}, the revised {CONTRACTOR_POLICY}).",
    ]  # fmt: skip
    return walk, hops, lines
