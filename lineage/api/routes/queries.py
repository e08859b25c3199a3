"""Queries: one call per query (query -> retrieval -> answer), and its trace read back."""

from typing import Any

from fastapi import APIRouter

from lineage.api import models
from lineage.api.deps import AppSettings, Db, Ingest, Read, ReadDb, SentTraceId
from lineage.api.results import Json
from lineage.core.queries import QueryIn
from lineage.services.queries import query_trace, store_query

router = APIRouter(prefix="/v1/queries", tags=["queries"])


@router.post(
    "",
    status_code=201,
    responses={200: {"model": models.QueryRecorded, "description": models.REPLAY}},
    response_model=models.QueryRecorded,
)
async def post_query(
    body: QueryIn, database: Db, caller: Ingest, sent_trace_id: SentTraceId
) -> Json:
    """Record a query, its retrieval (evidence with scores, routing, backends) and its answer in
    one transaction, signed. 201 when new, 200 for an identical replay, 409 for a request id
    already recorded with other content. Evidence ids the tenant does not know are listed in
    `unknown_ids` (and on the retrieval), never made into edges."""
    recorded = await store_query(database, caller.tenant_id, body, sent_trace_id)
    return Json(recorded, status_code=201 if recorded["created"] else 200)


@router.get("/{request_id}/trace", response_model=models.QueryTrace)
async def get_query_trace(
    request_id: str, database: ReadDb, caller: Read, settings: AppSettings
) -> dict[str, Any]:
    """The request's records, each with its signature check (signed, verified, key_id, reason),
    and the span tree of its trace. 404 for an unknown (or another tenant's) request id."""
    return await query_trace(database, settings, caller.tenant_id, request_id)
