"""Exports of one context: its walk-back as W3C PROV, its provenance header for generated files."""

from typing import Literal

from fastapi import APIRouter
from fastapi.responses import Response

from lineage.api import models
from lineage.api.deps import HEAVY_SLOT, AppSettings, Read, ReadDb
from lineage.api.results import Json
from lineage.core.offload import in_process
from lineage.interop import headers, prov
from lineage.services import walks

router = APIRouter(prefix="/v1/contexts", tags=["exports"])


@router.get("/{context_id}/prov", responses=models.PROV_DOCUMENTS, dependencies=[HEAVY_SLOT])
async def get_prov(
    context_id: str,
    database: ReadDb,
    caller: Read,
    settings: AppSettings,
    format: Literal["json", "provn", "jsonld", "xml"] = "json",
    max_depth: int | None = None,
) -> Response:
    """The walk-back as a PROV document: contexts as entities, transforms as activities,
    produced_by as agents (see lineage/interop/prov.py)."""
    records = await walks.walk_back_json(
        database, settings, caller.tenant_id, context_id, max_depth
    )
    # Seconds of CPU for a large walk: in a worker process (lineage.core.offload).
    body = await in_process(prov.written_from_json, context_id, records, caller.tenant_id, format)
    return Response(body, media_type=prov.MEDIA_TYPES[format])


@router.get(
    "/{context_id}/header", response_model=models.ProvenanceEnvelope, responses=models.FRONT_MATTER
)
async def get_header(
    context_id: str,
    database: ReadDb,
    caller: Read,
    format: Literal["yaml", "json"] = "json",
) -> Response:
    """Provenance for a generated file: YAML front-matter or a JSON envelope (trace_id,
    operation, provider, model, inputs fingerprint, generated time, consumed ids, and the
    request, service-call and transport layers from the trace's spans under `request`)."""
    header = await headers.provenance_header(database, caller.tenant_id, context_id)
    if format == "yaml":
        return Response(headers.front_matter(header), media_type="application/yaml")
    return Json(headers.envelope(header))
