"""What a route may ask for: the pools, the settings, and the caller (tenant, key, scope).

`Pool` is the primary: every route that writes (appends, verdicts, checkpoints, keys) uses it,
and so do audit rows. `ReadPool` is the read replica when LINEAGE_READ_DATABASE_URL names one,
else the primary: a route that only reads uses it, so a hot standby can serve it.
"""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import asyncpg
from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.requests import HTTPConnection
from starlette.types import Scope as StarletteScope

from lineage.api.session import SESSION_COOKIE, read_session
from lineage.core import metrics, telemetry
from lineage.core.errors import BadParameter, Forbidden, StoreUnavailable, Unauthorized
from lineage.services import audit, auth
from lineage.services.auth import Caller, Scope
from lineage.services.signing import Signer
from lineage.settings import Settings

__all__ = [
    "Admin",
    "AppSettings",
    "AppSigner",
    "Caller",
    "Ingest",
    "Pool",
    "Read",
    "ReadPool",
    "SentTraceId",
]

T = TypeVar("T")


# Async, so that FastAPI runs them on the event loop: a plain `def` costs a worker-thread hop.
async def get_pool(request: Request) -> asyncpg.Pool:
    return _pool(request.app, "pool")


async def get_read_pool(request: Request) -> asyncpg.Pool:
    return _pool(request.app, "read_pool")


def _pool(app: Any, which: str) -> asyncpg.Pool:
    pool: asyncpg.Pool | None = getattr(app.state, which)
    if pool is None:
        raise StoreUnavailable(f"not ready: {app.state.not_ready}; retry shortly")
    return pool


async def on_primary(app: Any, lookup: Callable[[asyncpg.Pool], Awaitable[T]]) -> T:
    """A key lookup on the primary, so that a revocation holds at once; while the primary
    cannot answer, on the read replica (as replayed so far), so that reads go on."""
    try:
        async with asyncio.timeout(audit.WRITE_TIMEOUT_S):
            return await lookup(_pool(app, "pool"))
    except audit.SPOOLED_ERRORS:
        if app.state.read_pool is app.state.pool:
            raise
        metrics.count_degraded("keys_read_on_replica")
        return await lookup(_pool(app, "read_pool"))


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_signer(request: Request) -> Signer:
    signer: Signer = request.app.state.signer
    return signer


async def sent_trace_id(request: Request) -> str | None:
    """The trace id the caller sent (`traceparent`, else `X-Trace-Id`), for records without one."""
    return telemetry.trace_id_from_headers(request.headers)


# Where a request's scope keeps the caller once verified: the admission layer (limits) and the
# routes ask once between them.
_VERIFIED = "lineage_verified_caller"


def verified_caller(scope: StarletteScope) -> Caller | None:
    """The caller already verified for this request (None: none yet, or none valid)."""
    found: Caller | None = scope.get("state", {}).get(_VERIFIED)
    return found


async def caller_of(scope: StarletteScope) -> Caller | None:
    """The caller named by `Authorization: Bearer <key>` or the explorer's session cookie,
    verified (database lookup) once per request; None when there is none or it is invalid."""
    state = scope.setdefault("state", {})
    if _VERIFIED in state:
        found: Caller | None = state[_VERIFIED]
        return found
    app = scope["app"]
    connection = HTTPConnection(scope)
    caller = None
    if app.state.auth == "none":
        caller = auth.NO_AUTH_CALLER
    elif (token := auth.bearer_token(connection.headers.get("authorization", ""))) is not None:
        if auth.KEY_PATTERN.match(token):  # anything else is refused without a lookup
            caller = await on_primary(app, lambda pool: auth.authenticate(pool, token))
    elif cookie := connection.cookies.get(SESSION_COOKIE):
        caller = read_session(cookie, app.state.settings)
        if caller is not None:
            session = caller
            if not await on_primary(app, lambda pool: auth.still_valid(pool, session)):
                caller = None
    state[_VERIFIED] = caller
    return caller


def _query_names(dependant: Dependant) -> set[str]:
    names = {param.alias for param in dependant.query_params}
    for dependency in dependant.dependencies:
        names |= _query_names(dependency)
    return names


async def refuse_unknown_query_parameters(request: Request) -> None:
    """A parameter is honoured or refused, never ignored: 422 for a query parameter the route
    does not take (a misspelt or unsupported filter would otherwise widen the answer)."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not route.include_in_schema:
        return  # the explorer's pages read their query in the browser
    allowed = _query_names(route.dependant)  # a walk of a few objects: no cache needed
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed)) or "no query parameters"
        raise BadParameter(
            f"unknown query parameter {', '.join(unknown)}: {request.method} "
            f"{route.path} takes {takes}"
        )


async def identify(request: Request) -> Caller:
    """The caller named by `Authorization: Bearer <key>` or the explorer's session cookie."""
    caller = await caller_of(request.scope)
    if caller is None:
        raise Unauthorized(
            "send `Authorization: Bearer <key>` with a valid, unrevoked key "
            "(create one with `lineage key create --tenant NAME --scope read`)"
        )
    return caller


def require(scope: Scope) -> object:
    """A dependency that admits callers whose key grants `scope`; reads are audited."""

    async def caller(request: Request) -> Caller:
        found = await identify(request)
        request.state.caller = found
        if not found.may(scope):
            raise Forbidden(f"this key's scope is {found.scope}; this request needs {scope}")
        if scope != "ingest":
            target = "/".join(str(v) for v in request.path_params.values()) or None
            detail = dict(request.query_params)
            await audit.record(
                await get_pool(request),
                found,
                request.scope["route"].name,
                target,
                detail,
                spool=audit.spool_dir(await get_settings(request)),
            )
        return found

    return Depends(caller)


Pool = Annotated[asyncpg.Pool, Depends(get_pool)]
ReadPool = Annotated[asyncpg.Pool, Depends(get_read_pool)]
AppSettings = Annotated[Settings, Depends(get_settings)]
AppSigner = Annotated[Signer, Depends(get_signer)]
SentTraceId = Annotated[str | None, Depends(sent_trace_id)]
# A route declares the scope it needs; the caller's tenant confines every query it runs.
Ingest = Annotated[Caller, require("ingest")]
Read = Annotated[Caller, require("read")]
# Verdicts are what people act on: only a key that may run a judge records them.
Verify = Annotated[Caller, require("verify")]
Admin = Annotated[Caller, require("admin")]
