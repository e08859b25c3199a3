"""record_query(): one call per query for a gateway, degrade-open.

    recorded = await record_query(store, "req-42", query=question, answer=text,
                                  evidence=[("chunk_7", 0.82, "vector")], model="gpt-4o",
                                  routing={"decision": "hybrid"}, backends=["bm25", "vector"])

Through an HttpStore it posts to `POST /v1/queries`; through a PostgresStore it writes the same
three records (lineage.services.queries) directly (each store's `record_query`). It never raises
into the caller's path: when the records cannot be written (store down, bad input, a conflicting
replay) it logs why, counts it (`lineage_degraded_total{reason="query_not_recorded"}`) and
returns None.
"""

import logging
from collections.abc import Sequence
from typing import Any

from lineage.core import metrics, telemetry
from lineage.core.queries import QueryIn
from lineage.core.store import Store

log = logging.getLogger(__name__)

EvidenceItem = tuple[str, float | None, str | None] | tuple[str, float | None] | str


def _evidence(items: Sequence[EvidenceItem]) -> list[Any]:
    found: list[Any] = []
    for item in items:
        if isinstance(item, str):
            found.append({"context_id": item})
        else:
            fields = dict(zip(("context_id", "score", "backend"), item, strict=False))
            found.append(fields)
    return found


async def record_query(
    store: Store,
    request_id: str,
    *,
    query: str | None = None,
    query_hash: str | None = None,
    evidence: Sequence[EvidenceItem] = (),
    answer: str | None = None,
    answer_hash: str | None = None,
    model: str | None = None,
    routing: dict[str, Any] | None = None,
    backends: Sequence[str] = (),
    produced_by: str | None = None,
    index_snapshot: str | None = None,
    trace_id: str | None = None,
) -> dict[str, Any] | None:
    """Record query -> retrieval -> answer in one transaction; None when degraded."""
    try:
        body = QueryIn(
            request_id=request_id,
            query=query,
            query_hash=query_hash,
            evidence=_evidence(evidence),
            answer=answer,
            answer_hash=answer_hash,
            model=model,
            routing=routing or {},
            backends=list(backends),
            produced_by=produced_by,
            index_snapshot=index_snapshot,
            trace_id=trace_id or telemetry.current_trace_id(),
        )
        return await store.record_query(body)
    except Exception as exc:  # degrade-open: the gateway's answer must go out regardless
        log.warning("lineage did not record query %r: %r", request_id, exc)
        metrics.count_degraded("query_not_recorded")
        return None
