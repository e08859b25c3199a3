"""Privacy, for admin keys: the tenant's text capture switches, and the right to be forgotten."""

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from lineage.api.deps import Admin, AppSettings, Db, ReadDb
from lineage.services import privacy
from lineage.services.forget import Forgotten, forget

router = APIRouter(prefix="/v1", tags=["privacy"])


class SettingsIn(BaseModel):
    """The switches to change; one left out keeps its value."""

    model_config = ConfigDict(extra="forbid")

    capture_source_text: StrictBool | None = Field(
        default=None, description="documents, chunks, summaries, tool results and the rest"
    )
    capture_query_text: StrictBool | None = Field(default=None, description="queries")
    capture_answer_text: StrictBool | None = Field(default=None, description="answers and claims")


class ForgetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source_uri: str = Field(min_length=1)
    max_depth: int | None = Field(default=None, description="defaults to the service's")
    dry_run: StrictBool = Field(
        default=False,
        description="walk and ask each vector store what it holds; purge, delete and append "
        "nothing",
    )


@router.get("/tenant/settings", response_model=privacy.TenantSettings)
async def get_tenant_settings(database: ReadDb, caller: Admin) -> privacy.TenantSettings:
    """Which texts this tenant captures (all off by default)."""
    return await privacy.get_settings(database, caller.tenant_id)


@router.put("/tenant/settings", response_model=privacy.TenantSettings)
async def put_tenant_settings(
    body: SettingsIn, database: Db, caller: Admin
) -> privacy.TenantSettings:
    """Turn text capture on or off, per class of text; returns every switch."""
    return await privacy.update_settings(database, caller, body.model_dump())


@router.post("/forget", response_model=Forgotten)
async def forget_source(
    body: ForgetIn, database: Db, caller: Admin, settings: AppSettings
) -> Forgotten:
    """Right to be forgotten: every record derived from `source_uri` (with its kind, for the
    downstream stores), the vectors of its chunks and embeddings deleted from each registered
    vector store (a receipt each), captured text purged, tombstones appended. 422 if max_depth
    cuts the walk short (nothing written), 404 if no record has the source_uri. A store that
    failed is reported in `vector_stores` with `complete` false: send the request again."""
    return await forget(
        database, settings, caller, body.source_uri, body.max_depth, dry_run=body.dry_run
    )
