"""What a route may ask for: the pools, the settings, and the caller (tenant, key, scope).

`Pool` is the primary: every route that writes (appends, verdicts, checkpoints, keys) uses it,
and so do audit rows. `ReadPool` is the read replica when LINEAGE_READ_DATABASE_URL names one,
else the primary: a route that only reads uses it, so a hot standby can serve it.
"""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import asyncpg
from fastapi import Depends, Request

from lineage.api.session import SESSION_COOKIE, read_session
from lineage.core import metrics, telemetry
from lineage.core.errors import Forbidden, StoreUnavailable, Unauthorized
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
    pool: asyncpg.Pool | None = request.app.state.pool
    if pool is None:
        raise StoreUnavailable(f"not ready: {request.app.state.not_ready}; retry shortly")
    return pool


async def get_read_pool(request: Request) -> asyncpg.Pool:
    pool: asyncpg.Pool | None = request.app.state.read_pool
    if pool is None:
        raise StoreUnavailable(f"not ready: {request.app.state.not_ready}; retry shortly")
    return pool


async def on_primary(request: Request, lookup: Callable[[asyncpg.Pool], Awaitable[T]]) -> T:
    """A key lookup on the primary, so that a revocation holds at once; while the primary
    cannot answer, on the read replica (as replayed so far), so that reads go on."""
    try:
        async with asyncio.timeout(audit.WRITE_TIMEOUT_S):
            return await lookup(await get_pool(request))
    except audit.SPOOLED_ERRORS:
        if request.app.state.read_pool is request.app.state.pool:
            raise
        metrics.count_degraded("keys_read_on_replica")
        return await lookup(await get_read_pool(request))


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_signer(request: Request) -> Signer:
    signer: Signer = request.app.state.signer
    return signer


async def sent_trace_id(request: Request) -> str | None:
    """The trace id the caller sent (`traceparent`, else `X-Trace-Id`), for records without one."""
    return telemetry.trace_id_from_headers(request.headers)


async def identify(request: Request) -> Caller:
    """The caller named by `Authorization: Bearer <key>` or the explorer's session cookie."""
    if request.app.state.auth == "none":
        return auth.NO_AUTH_CALLER
    token = auth.bearer_token(request.headers.get("authorization", ""))
    caller = None
    if token is not None:
        caller = await on_primary(request, lambda pool: auth.authenticate(pool, token))
    elif cookie := request.cookies.get(SESSION_COOKIE):
        caller = read_session(cookie, await get_settings(request))
        if caller is not None:
            session = caller
            if not await on_primary(request, lambda pool: auth.still_valid(pool, session)):
                caller = None
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
Admin = Annotated[Caller, require("admin")]
