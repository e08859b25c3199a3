"""What a route may ask for: the database, the settings, and the caller (tenant, key, scope).

`Db` is the app's one Database, on the primary: every route that writes (appends, verdicts,
checkpoints, keys) uses it, and so do audit rows. `ReadDb` is the same Database reading from
the read replica when LINEAGE_READ_DATABASE_URL names one (`Database.reads`): a route that only
reads uses it, so a hot standby can serve it.
"""

import re
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, Request, Security
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BeforeValidator
from starlette.requests import HTTPConnection
from starlette.types import Scope as StarletteScope

from lineage.api.fairness import FairShares, Work
from lineage.api.session import SESSION_COOKIE, read_session
from lineage.core import telemetry
from lineage.core.errors import BadParameter, Forbidden, StoreUnavailable, Unauthorized
from lineage.db.database import Database
from lineage.services import audit, auth
from lineage.services.auth import Caller, Scope
from lineage.services.key_cache import KeyCache
from lineage.settings import Settings

__all__ = [
    "EVENT_STREAM_SLOT",
    "HEAVY_SLOT",
    "STREAMED_IMPACT_SLOT",
    "Admin",
    "AppSettings",
    "Caller",
    "Db",
    "Ingest",
    "IsoTime",
    "Read",
    "ReadDb",
    "SentTraceId",
]


def database_of(app: Any) -> Database:
    """The app's Database; until it is connected, StoreUnavailable (503, retry)."""
    database: Database | None = app.state.db
    if database is None:
        raise StoreUnavailable(f"not ready: {app.state.not_ready}; retry shortly")
    return database


# Async, so that FastAPI runs them on the event loop: a plain `def` costs a worker-thread hop.
async def get_database(request: Request) -> Database:
    return database_of(request.app)


async def get_read_database(request: Request) -> Database:
    return database_of(request.app).reads


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


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
    primary = database_of(app) if app.state.auth != "none" else None

    def cache(database: Database) -> KeyCache | None:
        """The key cache listens on the primary: a replica answering for it looks keys up."""
        return app.state.keys if database is primary else None

    caller = None
    if primary is None:
        caller = auth.NO_AUTH_CALLER
    elif (token := auth.bearer_token(connection.headers.get("authorization", ""))) is not None:
        if auth.KEY_PATTERN.fullmatch(token):  # anything else is refused without a lookup
            caller = await primary.on_primary(
                lambda database: auth.authenticate(database, token, cache(database))
            )
    elif cookie := connection.cookies.get(SESSION_COOKIE):
        caller = read_session(cookie, app.state.settings)
        if caller is not None:
            session = caller
            if not await primary.on_primary(
                lambda database: auth.still_valid(database, session, cache(database))
            ):
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


def exactly_one(**parameters: str | None) -> tuple[str, str]:
    """The one query parameter given of several alternatives, or a 422 naming them all."""
    given = [(name, value) for name, value in parameters.items() if value is not None]
    if len(given) != 1:
        raise BadParameter(f"give exactly one of {', '.join(parameters)}")
    return given[0]


async def identify(request: Request) -> Caller:
    """The caller named by `Authorization: Bearer <key>` or the explorer's session cookie."""
    caller = await caller_of(request.scope)
    if caller is None:
        raise Unauthorized(
            "send `Authorization: Bearer <key>` with a valid, unrevoked key "
            "(create one with `lineage key create --tenant NAME --scope read`)"
        )
    return caller


# The scheme /openapi.json names on every operation that needs a key (so /docs offers
# "Authorize"); `caller_of` reads the header itself, as the admission layer needs it first.
BEARER = HTTPBearer(
    scheme_name="bearer",
    description=(
        "A key, sent as `Authorization: Bearer lk_...` (create one with `lineage key create "
        "--tenant NAME --scope SCOPE`). Each operation lists the scope it needs: admin grants "
        "every scope, verify grants read. With LINEAGE_AUTH=none no key is needed."
    ),
    auto_error=False,
)


def admit_and_audit(scope: Scope) -> object:
    """A dependency that admits callers whose key grants `scope` and writes an audit row for
    every request except an ingest (in the work's transaction when it can, alone otherwise)."""

    async def caller(
        request: Request,
        # Documents the key and its scope; the header is read (once) by caller_of.
        _: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER, scopes=[scope])],
    ) -> AsyncIterator[Caller]:
        found = await identify(request)
        request.state.caller = found
        if not found.may(scope):
            raise Forbidden(f"this key's scope is {found.scope}; this request needs {scope}")
        if scope == "ingest":
            yield found
            return
        action = request.scope["route"].name
        target = "/".join(str(v) for v in request.path_params.values()) or None
        detail = dict(request.query_params)
        async with audit.ride_along(database_of(request.app), found, action, target, detail):
            yield found

    return Depends(caller, scope="function")


def work_slot(work: Work, *, only_streamed: bool = False) -> Any:
    """A dependency that holds one of the caller's fair shares of `work` until the answer is
    sent, streamed bodies included (lineage/api/fairness.py); 429 past the key's or tenant's
    limit. With `only_streamed`, only when the caller asks for NDJSON."""

    async def slot(request: Request) -> AsyncIterator[None]:
        if only_streamed and "application/x-ndjson" not in request.headers.get("accept", ""):
            yield  # one JSON answer, bounded by LINEAGE_STREAM_THRESHOLD
            return
        caller = await identify(request)
        shares: FairShares = request.app.state.fair_shares
        async with shares.slot(work, caller):
            yield

    return Depends(slot)


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _time_not_number(value: object) -> object:
    """pydantic reads a number as seconds since 1970: `since=0.5` would be a date."""
    if isinstance(value, int | float) or (isinstance(value, str) and _NUMBER.fullmatch(value)):
        raise ValueError(
            f"{str(value)[:40]!r} is a number, not a time: send an ISO 8601 date or time "
            "such as 2026-09-01 or 2026-09-01T12:00:00Z"
        )
    return value


# A time query parameter: an ISO 8601 date or time, never a number.
IsoTime = Annotated[datetime, BeforeValidator(_time_not_number)]
Db = Annotated[Database, Depends(get_database)]
ReadDb = Annotated[Database, Depends(get_read_database)]
AppSettings = Annotated[Settings, Depends(get_settings)]
SentTraceId = Annotated[str | None, Depends(sent_trace_id)]
# A route declares the scope it needs; the caller's tenant confines every query it runs.
Ingest = Annotated[Caller, admit_and_audit("ingest")]
Read = Annotated[Caller, admit_and_audit("read")]
# Verdicts are what people act on: only a key that may run a judge records them.
Verify = Annotated[Caller, admit_and_audit("verify")]
Admin = Annotated[Caller, admit_and_audit("admin")]
# A route that does heavy work names its kind in `dependencies=[...]`.
HEAVY_SLOT = work_slot("heavy")
STREAMED_IMPACT_SLOT = work_slot("heavy", only_streamed=True)
EVENT_STREAM_SLOT = work_slot("event_stream")
