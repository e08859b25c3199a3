"""Contexts: append, read, walk back, blast radius of one context, list and filter."""

import email.message
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, ValidationError

from lineage.api import models
from lineage.api.deps import (
    STREAMED_IMPACT_SLOT,
    AppSettings,
    Caller,
    Db,
    Ingest,
    IsoTime,
    Read,
    ReadDb,
    SentTraceId,
)
from lineage.api.results import Json, impact_response
from lineage.core import cursors
from lineage.core.errors import BadParameter, InvalidRecord
from lineage.core.hashing import content_hash
from lineage.core.offload import per_byte, per_record
from lineage.core.record import RESERVED_KINDS, ContextFields, NewContext, new_context_id
from lineage.core.store import Appended
from lineage.services import appends, reads, records, walks

router = APIRouter(prefix="/v1/contexts", tags=["contexts"])

EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)


class ContextIn(ContextFields):
    """One record to append: send `content_hash` (text never leaves you) or `text` (hashed by
    the server and dropped). A query's, claim's or answer's `sha256:` hash is keyed on the way
    in (HMAC-SHA256 under the tenant's text hash key), so it cannot be confirmed by guessing."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = None

    def proposal(self, sent_trace_id: str | None = None) -> NewContext:
        """The record; one without a trace_id takes the one the request's headers carry."""
        if (self.content_hash is None) == (self.text is None):
            raise InvalidRecord("hash_or_text", "send exactly one of content_hash or text")
        fields = self.model_dump(exclude={"text"})
        fields["trace_id"] = self.trace_id or sent_trace_id
        fields["content_hash"] = self.content_hash or content_hash(self.text or "")
        fields["context_id"] = self.context_id or new_context_id()
        return NewContext(**fields)


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    records: list[ContextIn]


def _batch_from(body: bytes, content_type: str | None) -> BatchIn:
    """The batch in a request body, read as FastAPI reads a JSON body parameter: JSON only
    under a JSON content type, every error a RequestValidationError located in `body`."""
    if not body:
        raise RequestValidationError(
            [{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}]
        )
    message = email.message.Message()
    message["content-type"] = content_type or "application/octet-stream"
    subtype = message.get_content_subtype()
    is_json = message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )
    try:
        return BatchIn.model_validate(json.loads(body) if is_json else body)
    except json.JSONDecodeError as exc:
        raise _not_json(exc.pos, exc.msg) from exc
    except UnicodeDecodeError as exc:
        raise _not_json(exc.start, "the body is not UTF-8") from exc
    except ValidationError as exc:
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]
        ) from exc


def _not_json(position: int, why: str) -> RequestValidationError:
    return RequestValidationError(
        [{"type": "json_invalid", "loc": ("body", position), "msg": "JSON decode error",
          "input": {}, "ctx": {"error": why}}]
    )  # fmt: skip


async def batch_body(request: Request) -> BatchIn:
    """The batch, parsed off the event loop when the body is large (lineage/core/offload.py):
    tens of thousands of records take a large share of a second to read and check."""
    body = await request.body()
    return await per_byte(len(body), _batch_from, body, request.headers.get("content-type"))


# The body batch_body reads, as the schema shows it (ContextIn is a schema of its own, that of
# POST /v1/contexts).
_BATCH_SCHEMA = BatchIn.model_json_schema(ref_template="#/components/schemas/{model}")
_BATCH_BODY = {
    "required": True,
    "content": {
        "application/json": {"schema": {k: v for k, v in _BATCH_SCHEMA.items() if k != "$defs"}}
    },
}


@router.post(
    "",
    status_code=201,
    responses={200: {"model": models.Record, "description": models.REPLAY}},
    response_model=models.Record,
)
async def append_context(
    body: ContextIn,
    request: Request,
    database: Db,
    caller: Ingest,
    sent_trace_id: SentTraceId,
) -> Json:
    """Append one record: 201 when new, 200 for an identical replay, 409 for other content."""
    proposal = body.proposal(sent_trace_id)
    _refuse_reserved([proposal.kind])
    appended = await request.app.state.appends.append(database, caller.tenant_id, proposal)
    _sample(request, caller, [appended])
    return Json(appended.record.api_dict(), status_code=201 if appended.created else 200)


@router.post(
    "/batch",
    status_code=201,
    response_model=models.BatchAppended,
    responses={
        200: {"model": models.BatchAppended, "description": "every record " + models.REPLAY}
    },
    openapi_extra={"requestBody": _BATCH_BODY},
)
async def append_batch(
    body: Annotated[BatchIn, Depends(batch_body)],
    request: Request,
    database: Db,
    caller: Ingest,
    settings: AppSettings,
    sent_trace_id: SentTraceId,
) -> Json:
    """Append many in one transaction, all or nothing; parents may come earlier in the batch."""
    if len(body.records) > settings.max_batch_records:
        raise InvalidRecord(
            "batch_too_large",
            f"{len(body.records)} records; send at most {settings.max_batch_records} per batch",
        )
    proposals = await per_record(len(body.records), _proposals, body.records, sent_trace_id)
    appended = await appends.append(database, caller.tenant_id, proposals)
    _sample(request, caller, appended)
    answer = await per_record(len(appended), _batch_answer, appended)
    return Json(answer, status_code=201 if any(a.created for a in appended) else 200)


def _proposals(records: Sequence[ContextIn], sent_trace_id: str | None) -> list[NewContext]:
    proposals = [item.proposal(sent_trace_id) for item in records]
    _refuse_reserved([p.kind for p in proposals])
    return proposals


def _batch_answer(appended: Sequence[Appended]) -> dict[str, Any]:
    return {"results": [{"created": a.created, "record": a.record.api_dict()} for a in appended]}


def _sample(request: Request, caller: Caller, appended: Sequence[Appended]) -> None:
    """New answers and hand-offs go to background verification (a share; never blocks)."""
    new = [(a.record.context_id, a.record.kind) for a in appended if a.created]
    request.app.state.sampler.offer(caller.tenant_id, new)


# Where each reserved kind comes from, for the refusal to say what to do instead.
_OWN_PATHS = {
    "tombstone": "POST /v1/forget (an admin key) appends forget tombstones",
    "verdict": "POST /v1/contexts/{id}/verify (a key with the verify scope) records verdicts",
}


def _refuse_reserved(kinds: Sequence[str]) -> None:
    """Tombstones and verdicts are the service's own proof: any key that could append them could
    forge a forget (a later forget then finds its roots already tombstoned) or a judge's word."""
    for kind in sorted(set(kinds) & RESERVED_KINDS):
        raise InvalidRecord(
            "reserved_kind",
            f"kind {kind!r} is written only by the service itself, never appended: "
            f"{_OWN_PATHS.get(kind, 'its own route writes it')}",
        )


def _after(cursor: str | None) -> tuple[datetime, str]:
    if cursor is None:
        return EARLIEST, ""
    created_at, context_id = cursors.decode(cursor, str, str)
    try:
        return datetime.fromisoformat(created_at), context_id
    except ValueError as exc:
        raise BadParameter("cursor is not one this API returned as `next`") from exc


@router.get("", response_model=models.RecordPage)
async def list_contexts(
    database: ReadDb,
    caller: Read,
    settings: AppSettings,
    kind: str = "any",
    source_uri: str = "any",
    trace_id: str = "any",
    produced_by: str = "any",
    session_id: Annotated[
        str, Query(description="only records whose attributes.session_id is this")
    ] = "any",
    since: IsoTime | None = None,
    until: IsoTime | None = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Json:
    """Records matching every filter, oldest first, a page at a time (follow `next`)."""
    after_created_at, after_context_id = _after(cursor)
    rows = await reads.list_contexts(
        database,
        settings,
        tenant_id=caller.tenant_id,
        kind=walks.check_kind(kind) if kind != "any" else "any",
        source_uri=source_uri,
        trace_id=trace_id,
        produced_by=produced_by,
        session_id=session_id,
        since=since or EARLIEST,
        until=until or LATEST,
        after_created_at=after_created_at,
        after_context_id=after_context_id,
        page_size=limit,
    )
    last = rows[-1] if len(rows) == limit else None
    # Sent as built, as a record is: validating each record against its model cost a page of
    # 100 about a quarter of its server time (tests/test_request_cost.py checks the body).
    return Json(
        {
            "records": rows,
            "next": cursors.encode(last["created_at"], last["context_id"]) if last else None,
        }
    )


@router.get("/{context_id}", response_model=models.CheckedRecord)
async def get_context(
    context_id: str,
    database: ReadDb,
    caller: Read,
    settings: AppSettings,
    verify: Annotated[
        bool, Query(description="Also check the stored row against its stored signature.")
    ] = False,
) -> Json:
    """One record; with verify=true also `signature`: signed, verified, key_id and reason
    (ok, unsigned, mismatch, unknown_key)."""
    # Sent as built, as the walk-back is: pydantic's serializer stops at 255 levels, and records
    # stored before attributes were held to 64 may nest deeper (tests/test_request_cost.py
    # checks the body against models.CheckedRecord).
    return Json(
        await records.record_node(database, settings, caller.tenant_id, context_id, verify=verify)
    )


@router.get("/{context_id}/lineage", response_model=models.WalkBack)
async def get_lineage(
    context_id: str,
    database: ReadDb,
    caller: Read,
    settings: AppSettings,
    max_depth: int | None = None,
    layers: Annotated[
        bool,
        Query(
            description="give each node its `request` layer (service and transport nested), "
            "read from the stored spans of its trace; null when none is stored"
        ),
    ] = False,
) -> Json:
    """Walk-back: every ancestor once with its depth (the start is 0), the edges, and whether
    the walk is cut short (truncated_reason: max_depth, or retention when it reached records
    the retention period dropped)."""
    walk = await walks.walk_back(
        database, settings, caller.tenant_id, context_id, max_depth, layers=layers
    )
    # Sent as built: checking each node against its model cost more server time than the
    # walk's SQL (tests/test_request_cost.py checks the body against models.WalkBack).
    return Json(
        {
            "context_id": context_id,
            "nodes": walk.nodes,
            "edges": walk.edges(),
            "truncated": walk.truncated,
            "truncated_reason": walk.truncated_reason,
        }
    )


@router.get("/{context_id}/suspicious", response_model=models.SuspiciousHops)
async def get_suspicious_hops(
    context_id: str,
    database: ReadDb,
    caller: Read,
    settings: AppSettings,
    max_depth: int | None = None,
) -> dict[str, Any]:
    """Each hop of the walk-back that is suspect, and why (sql/suspicious_hops.sql)."""
    hops = await walks.suspicious_hops(database, settings, caller.tenant_id, context_id, max_depth)
    return {"context_id": context_id, "hops": hops}


@router.get(
    "/{context_id}/impact",
    response_model=models.Impact,
    responses=models.STREAMED_IMPACT,
    dependencies=[STREAMED_IMPACT_SLOT],
)
async def get_impact(
    context_id: str,
    request: Request,
    database: ReadDb,
    caller: Read,
    settings: AppSettings,
    kind: str = "any",
    max_depth: int | None = None,
) -> Response:
    """Blast radius: every descendant once, filtered by kind; NDJSON when asked."""
    await walks.require_context(database, settings, caller.tenant_id, context_id)
    return await impact_response(
        request,
        database,
        settings,
        "context_ids",
        tenant_id=caller.tenant_id,
        context_ids=[context_id],
        kind=walks.check_kind(kind),
        max_depth=walks.check_depth(settings, max_depth),
    )
