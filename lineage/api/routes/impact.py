"""Impact beyond one context: by source, transform version or index snapshot; freshness."""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from lineage.api import models
from lineage.api.deps import AppSettings, Read, ReadDb, exactly_one
from lineage.api.results import impact_response
from lineage.services import walks

router = APIRouter(prefix="/v1", tags=["impact"])


@router.get("/impact", response_model=models.Impact, responses=models.STREAMED_IMPACT)
async def get_impact(
    request: Request,
    database: ReadDb,
    caller: Read,
    settings: AppSettings,
    source_uri: str | None = None,
    transform_version: str | None = None,
    index_snapshot: str | None = None,
    kind: str = "any",
    max_depth: int | None = None,
) -> Response:
    """What depends on a document (source_uri), a transform version or an index snapshot:
    give exactly one. NDJSON (one record a line, then a summary) when asked."""
    name, value = exactly_one(
        source_uri=source_uri, transform_version=transform_version, index_snapshot=index_snapshot
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


@router.get("/freshness", response_model=models.Impact, responses=models.STREAMED_IMPACT)
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
