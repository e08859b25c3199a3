"""Sign-in for the explorer: a read-only session cookie in exchange for a key, and sign-out."""

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from lineage.api import models
from lineage.api.deps import AppSettings, Caller, Db
from lineage.api.results import Json
from lineage.api.session import SESSION_COOKIE, issue_session
from lineage.core.errors import Forbidden, Unauthorized
from lineage.services import auth

router = APIRouter(tags=["explorer"])


class SessionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str = Field(min_length=1, max_length=1024, description="a read or admin key")


@router.post("/v1/session", response_model=models.Session)
async def open_session(
    body: SessionIn, request: Request, database: Db, settings: AppSettings
) -> Json:
    """Exchange a key for the `lineage_session` cookie (HttpOnly, SameSite=Strict) that the
    explorer's requests, downloads and streams carry. The session can read, nothing more,
    whatever the key's scope, and ends after `LINEAGE_SESSION_TTL_SECONDS`. With
    LINEAGE_AUTH=none any key will do: every request is the default tenant's anyway."""
    if request.app.state.auth == "none":
        caller: Caller | None = auth.NO_AUTH_CALLER
    else:
        caller = await auth.authenticate(database, body.key)
    if caller is None:
        raise Unauthorized("the key is malformed, unknown or revoked: ask an admin for a key")
    if not caller.may("read"):
        raise Forbidden(f"a key of scope {caller.scope} cannot read: use a read or admin key")
    session = Caller(caller.tenant_id, caller.key_id, "read")
    response = Json(
        {"tenant_id": session.tenant_id, "scope": session.scope,
         "expires_in": settings.session_ttl_seconds}
    )  # fmt: skip
    response.set_cookie(
        SESSION_COOKIE,
        issue_session(session, settings),
        max_age=settings.session_ttl_seconds,
        path="/",
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


@router.delete("/v1/session", status_code=204)
async def close_session() -> Response:
    """Forget the session cookie (sign out)."""
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response
