"""Impact beyond one context: by source, transform version, index snapshot or embedding model;
freshness; and a blast radius a page at a time or as a file of ids (the explorer's and a
deletion job's)."""

import json
import re
from collections import Counter, defaultdict
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse

from lineage.api import models
from lineage.api.deps import (
    HEAVY_SLOT,
    STREAMED_IMPACT_SLOT,
    AppSettings,
    Caller,
    Read,
    ReadDb,
    exactly_one,
)
from lineage.api.results import Stream, chunked, impact_response, started
from lineage.api.routes.contexts import EARLIEST, LATEST
from lineage.core import cursors
from lineage.core.errors import BadParameter, NotFound
from lineage.core.record import BOOKKEEPING_KINDS
from lineage.db.database import Database
from lineage.services import reads, walks
from lineage.settings import Settings

router = APIRouter(prefix="/v1", tags=["impact"])


@router.get(
    "/impact",
    response_model=models.Impact,
    responses=models.STREAMED_IMPACT,
    dependencies=[STREAMED_IMPACT_SLOT],
)
async def get_impact(
    request: Request,
    database: ReadDb,
    caller: Read,
    settings: AppSettings,
    source_uri: str | None = None,
    transform_version: str | None = None,
    index_snapshot: str | None = None,
    embedding_model: str | None = None,
    kind: str = "any",
    max_depth: int | None = None,
) -> Response:
    """What depends on a document (source_uri), a transform version, an index snapshot or the
    chunks an embedding model embedded: give exactly one. NDJSON (one record a line, then a
    summary) when asked."""
    name, value = exactly_one(
        source_uri=source_uri,
        transform_version=transform_version,
        index_snapshot=index_snapshot,
        embedding_model=embedding_model,
    )
    return await impact_response(
        request,
        database,
        settings,
        name,
        tenant_id=caller.tenant_id,
        kind=walks.check_kind(kind),
        max_depth=walks.check_depth(settings, max_depth),
        **{name: value},
    )


@router.get(
    "/freshness",
    response_model=models.Impact,
    responses=models.STREAMED_IMPACT,
    dependencies=[STREAMED_IMPACT_SLOT],
)
async def get_freshness(
    request: Request,
    database: ReadDb,
    caller: Read,
    settings: AppSettings,
    source_uri: str = "any",
    kind: str = "any",
    max_depth: int | None = None,
) -> Response:
    """Records derived from a document revision that is no longer the newest."""
    return await impact_response(
        request,
        database,
        settings,
        "stale",
        tenant_id=caller.tenant_id,
        source_uri=source_uri,
        kind=walks.check_kind(kind),
        max_depth=walks.check_depth(settings, max_depth),
    )


async def _impact_start(
    database: Database,
    settings: Settings,
    caller: Caller,
    source_uri: str | None,
    context_id: str | None,
) -> tuple[str, dict[str, Any]]:
    """The impact question (walks.IMPACT_ID_QUERIES) and the parameter that starts it;
    NotFound when nothing would."""
    exactly_one(source_uri=source_uri, context_id=context_id)
    if context_id is not None:
        await walks.require_context(database, settings, caller.tenant_id, context_id)
        return "context_ids", {"context_ids": [context_id]}
    first = await reads.list_contexts(
        database, settings,
        tenant_id=caller.tenant_id, kind="any", source_uri=source_uri, trace_id="any",
        produced_by="any", session_id="any", since=EARLIEST, until=LATEST,
        after_created_at=EARLIEST,
        after_context_id="", page_size=1,
    )  # fmt: skip
    if not first:
        raise NotFound(f"no records with source_uri {source_uri}")
    return "source_uri", {"source_uri": source_uri}


@router.get("/impact/page", response_model=models.ImpactPage)
async def get_impact_page(
    database: ReadDb,
    caller: Read,
    settings: AppSettings,
    source_uri: str | None = None,
    context_id: str | None = None,
    kind: str = "answer",
    cursor: str | None = None,
    offset: Annotated[
        int | None, Query(ge=0, description="instead of `cursor`: the records to skip")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    max_depth: int | None = None,
) -> dict[str, Any]:
    """A blast radius (of every revision of a source_uri, or of one context) a page at a time:
    counts by kind, counts by kind on each layer (`layers`, by depth from the start), then up
    to `limit` records of `kind` (follow `next`; `offset` is how many come before the page).
    Each page lists the radius's ids again, holds only the page in memory and reads only the
    page's records."""
    if cursor is not None and offset is not None:
        raise BadParameter("give cursor (the `next` of a page) or offset, not both")
    # The radius streams in (depth, context_id) order: a page starts after its cursor's record.
    after = cursors.decode(cursor, int, str) if cursor is not None else None
    name, start = await _impact_start(database, settings, caller, source_uri, context_id)
    wanted = walks.check_kind(kind)
    counted = "all" if wanted == "all" or wanted in BOOKKEEPING_KINDS else "any"
    tally = walks.ImpactTally()
    layers: defaultdict[int, Counter[str]] = defaultdict(Counter)
    page: list[dict[str, Any]] = []
    matching = skipped = 0  # records of `kind`; those before the page
    async for node in walks.impact_ids(
        database, settings, name,
        tenant_id=caller.tenant_id, kind=counted,
        max_depth=walks.check_depth(settings, max_depth), **start,
    ):  # fmt: skip
        tally.add(node)
        layers[node["depth"]][node["kind"]] += 1
        if wanted in {"any", "all"} or node["kind"] == wanted:
            if after is None:
                before = matching < (offset or 0)
            else:
                before = (node["depth"], node["context_id"]) <= after
            if before:
                skipped += 1
            elif len(page) < limit:
                page.append(node)
            matching += 1
    more = skipped + len(page) < matching
    return {
        "source_uri": source_uri,
        "context_id": context_id,
        "kind": wanted,
        "summary": tally.summary().model_dump(mode="json"),
        "layers": [
            {"depth": depth, "counts_by_kind": dict(sorted(layers[depth].items()))}
            for depth in sorted(layers)
        ],
        "matching": matching,
        "offset": skipped,
        "nodes": await _with_records(database, settings, caller.tenant_id, page),
        "next": cursors.encode(page[-1]["depth"], page[-1]["context_id"]) if more else None,
        "next_offset": skipped + len(page) if more else None,
    }


async def _with_records(
    database: Database, settings: Settings, tenant_id: str, page: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The page's records, each with its depth and truncated flag, in the page's order."""
    ids = [node["context_id"] for node in page]
    found = await reads.records_by_id(database, settings, tenant_id, ids)
    records = {record["context_id"]: record for record in found}
    return [
        {key: value for key, value in records[node["context_id"]].items() if key != "tenant_id"}
        | {"depth": node["depth"], "truncated": node["truncated"]}
        for node in page
    ]


async def _csv_file(lines: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
    async with aclosing(lines):
        yield (",".join(reads.ID_FILE_COLUMNS) + "\r\n").encode()
        async for chunk in lines:
            yield chunk


async def _json_file(
    start: dict[str, Any],
    kind: str,
    batches: AsyncGenerator[list[tuple[dict[str, Any], bytes]], None],
) -> AsyncGenerator[bytes, None]:
    tally = walks.ImpactTally()
    yield f'{{"start": {json.dumps(start)}, "kind": {json.dumps(kind)}, "records": ['.encode()
    separator = b""
    async with aclosing(batches):
        async for batch in batches:
            for counted, _ in batch:
                tally.add(counted)
            yield separator + b", ".join(made for _, made in batch)
            separator = b", "
    yield f'], "summary": {json.dumps(tally.summary().model_dump(mode="json"))}}}'.encode()


@router.get("/impact/ids", responses=models.IMPACT_FILES, dependencies=[HEAVY_SLOT])
async def download_impact_ids(
    database: ReadDb,
    caller: Read,
    settings: AppSettings,
    source_uri: str | None = None,
    context_id: str | None = None,
    transform_version: str | None = None,
    index_snapshot: str | None = None,
    embedding_model: str | None = None,
    kind: str = "any",
    file_format: Annotated[Literal["csv", "json"], Query(alias="format")] = "csv",
    max_depth: int | None = None,
) -> StreamingResponse:
    """Every id of a blast radius (of a source_uri, a context, a transform version, an index
    snapshot or the chunks an embedding model embedded) as a file for a deletion, re-embedding
    or cache-invalidation job: CSV (context_id, kind, depth, truncated) or JSON with a closing
    summary. Streamed, so any size; a walk that fails midway cuts the transfer short instead
    of ending a plausible file."""
    asked = {
        "source_uri": source_uri,
        "context_id": context_id,
        "transform_version": transform_version,
        "index_snapshot": index_snapshot,
        "embedding_model": embedding_model,
    }
    given = {parameter: value for parameter, value in asked.items() if value is not None}
    if given.keys() & {"transform_version", "index_snapshot", "embedding_model"}:
        parameter, _ = exactly_one(**asked)
        name, start = parameter, given
    else:
        name, start = await _impact_start(database, settings, caller, source_uri, context_id)
    walk = {
        "tenant_id": caller.tenant_id,
        "kind": walks.check_kind(kind),
        "max_depth": walks.check_depth(settings, max_depth),
        **start,
    }
    label = re.sub(r"[^A-Za-z0-9._-]+", "_", next(iter(given.values()))).strip("_")[:80]
    disposition = f'attachment; filename="impact-{kind}-{label}.{file_format}"'
    if file_format == "csv":
        lines = await started(walks.impact_id_file(database, settings, name, **walk))
        return Stream(
            _csv_file(lines),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": disposition},
        )
    batches = await started(walks.impact_id_json(database, settings, name, **walk))
    return Stream(
        chunked(_json_file(given, kind, batches)),
        media_type="application/json",
        headers={"Content-Disposition": disposition},
    )
