"""One call per query, as a gateway makes it: the query, the routing decision and backends used,
the evidence with scores, the model and the answer become three records in one transaction —
query -> retrieval -> answer — signed as every record is.

Record ids come from the caller's request id (`req:<request_id>:query|retrieval|answer`), so a
replay is a no-op and `GET /v1/queries/{request_id}/trace` finds them. Evidence ids the tenant
does not know are kept on the retrieval (`attributes.unknown_ids`) and reported, never edges.
"""

from typing import Any

from lineage.core.errors import NotFound
from lineage.core.hashing import content_hash
from lineage.core.queries import ROLES, QueryIn
from lineage.core.record import ContextRecord, NewContext
from lineage.db.database import Database, Transaction
from lineage.services import reads, signing
from lineage.services.appends import append_records
from lineage.services.records import get_records
from lineage.services.spans import span_tree
from lineage.settings import Settings


def record_ids(request_id: str) -> list[str]:
    return [f"req:{request_id}:{role}" for role in ROLES]


async def store_query(
    database: Database, tenant_id: str, body: QueryIn, sent_trace_id: str | None = None
) -> dict[str, Any]:
    """Append the three records in one tenant transaction (all or none)."""
    async with database.tenant(tenant_id) as tx:
        return await append_query(tx, body, sent_trace_id)


async def append_query(
    tx: Transaction, body: QueryIn, sent_trace_id: str | None = None
) -> dict[str, Any]:
    """Append the three records within the caller's transaction (all or none)."""
    wanted = list(dict.fromkeys(e.context_id for e in body.evidence))
    known = await get_records(tx, wanted)
    evidence = [e for e in body.evidence if e.context_id in known]
    unknown = [i for i in wanted if i not in known]
    trace_id = body.trace_id or sent_trace_id
    query_hash = body.query_hash or content_hash(body.query or "")
    answer_hash = body.answer_hash or content_hash(body.answer or "")
    scores = {e.context_id: e.score for e in evidence if e.score is not None}
    by_backend: dict[str, list[str]] = {}
    for item in evidence:
        if item.backend:
            by_backend.setdefault(item.backend, []).append(item.context_id)
    common = {"trace_id": trace_id, "attributes": {"request_id": body.request_id}}
    proposals = [
        NewContext(
            context_id=body.record_id("query"),
            kind="query",
            source_uri=body.source_uri or f"request:{body.request_id}",
            content_hash=query_hash,
            **common,
        ),
        NewContext(
            context_id=body.record_id("retrieval"),
            parent_ids=[body.record_id("query"), *dict.fromkeys(e.context_id for e in evidence)],
            kind="retrieval",
            content_hash=content_hash(" ".join(e.context_id for e in evidence)),
            index_snapshot=body.index_snapshot,
            trace_id=trace_id,
            attributes={
                "request_id": body.request_id,
                "routing": body.routing,
                "backends": body.backends,
                "scores": scores,
            }
            | ({"by_backend": by_backend} if by_backend else {})
            | ({"unknown_ids": unknown} if unknown else {}),
        ),
        NewContext(
            context_id=body.record_id("answer"),
            parent_ids=[body.record_id("retrieval")],
            kind="answer",
            content_hash=answer_hash,
            produced_by=body.produced_by or body.model,
            trace_id=trace_id,
            attributes={"request_id": body.request_id}
            | ({"model": body.model} if body.model else {}),
        ),
    ]
    appended = await append_records(tx, proposals)
    return {
        "request_id": body.request_id,
        "trace_id": trace_id,
        "created": any(a.created for a in appended),
        "records": {role: a.record.api_dict() for role, a in zip(ROLES, appended, strict=True)},
        "unknown_ids": unknown,
    }


async def query_records(tx: Transaction, request_id: str) -> list[ContextRecord]:
    """The request's records, query first; none for an unknown or another tenant's request."""
    found = await get_records(tx, record_ids(request_id))
    return [found[i] for i in record_ids(request_id) if i in found]


async def query_trace(
    database: Database, settings: Settings, tenant_id: str, request_id: str
) -> dict[str, Any]:
    """The request's records, each with its signature check, and the span tree of its trace;
    NotFound for an unknown (or another tenant's) request id."""
    async with database.tenant(tenant_id) as tx:
        records = await query_records(tx, request_id)
        if not records:
            raise NotFound(f"no query recorded with request_id {request_id}")
        rows = await tx.fetch("get_contexts", context_ids=[r.context_id for r in records])
        nodes = {row["context_id"]: reads.node_from_row(row) for row in rows}
        for record in records:
            check = await signing.verify_record(tx.connection, tenant_id, record, tx.signer)
            nodes[record.context_id]["signature"] = check.model_dump(mode="json")
    trace_id = records[0].trace_id
    spans, truncated = (
        await span_tree(database, settings, tenant_id, trace_id) if trace_id else ([], False)
    )
    return {
        "request_id": request_id,
        "trace_id": trace_id,
        "records": [nodes[r.context_id] for r in records],
        "spans": spans,
        "spans_truncated": truncated,
    }
