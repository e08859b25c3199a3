"""The demo incident: "What notice period do contractors get?" was answered "30 days".

The claim cites a summary made from chunk_17 (employee policy: 30 days) and chunk_42 (the
contractor policy's old cross-reference to the employee policy). chunk_42 was cut by
chunker@1.4 into index snapshot idx_2026_08_01; the contractor policy has since been revised
to an explicit 14 days. Its walk-back shows both root causes.
"""

import asyncpg

from lineage.claims.judges import OfflineJudge
from lineage.claims.verify import Verification, ensure_verified, mapping_resolver
from lineage.core import telemetry
from lineage.core.derive import Context, Derivation, derive_many
from lineage.store.base import Store

ANSWER_ID = "answer_1"
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


async def verify_incident(pool: asyncpg.Pool, tenant_id: str = "default") -> Verification:
    """Judge the claim once against its summary, with both texts handed over here (text capture
    is off by default); a rerun shows the same verdict and appends nothing. Passing or not,
    its walk-back finds chunk_42."""
    texts = {
        name: next(item.text for item in INCIDENT if item.context_id == name)
        for name in ("summary_1", "claim_1")
    }
    return await ensure_verified(
        pool, tenant_id, ANSWER_ID, OfflineJudge(), mapping_resolver(texts)
    )
