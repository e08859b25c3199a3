"""Errors as application/problem+json, mapped from error classes in one place."""

from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from lineage.core import telemetry
from lineage.core.errors import (
    BadParameter,
    Conflict,
    Forbidden,
    InvalidRecord,
    LineageError,
    NotFound,
    StoreUnavailable,
    Unauthorized,
    WalkTimeout,
)
from lineage.store.postgres import OUTAGE_ERRORS, is_outage

STATUS = {
    InvalidRecord: 422,
    BadParameter: 422,
    NotFound: 404,
    Conflict: 409,
    WalkTimeout: 503,
    StoreUnavailable: 503,
    Unauthorized: 401,
    Forbidden: 403,
}
HEADERS: dict[type[LineageError], dict[str, str]] = {
    Unauthorized: {"WWW-Authenticate": 'Bearer realm="lineage"'},
    StoreUnavailable: {"Retry-After": "1"},
}


def problem(
    status: int, title: str, detail: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    # The request's trace id (lineage.api.logs), so a reported error can be found in the logs.
    if (trace_id := telemetry.current_trace_id()) is not None:
        body.setdefault("trace_id", trace_id)
    return JSONResponse(
        body, status_code=status, media_type="application/problem+json", headers=headers
    )


async def lineage_error(request: Request, exc: Exception) -> JSONResponse:
    status = next((code for cls, code in STATUS.items() if isinstance(exc, cls)), 500)
    extra = {"rule": exc.rule} if isinstance(exc, InvalidRecord) else {}
    detail = exc.message if isinstance(exc, InvalidRecord) else str(exc)
    headers = next((h for cls, h in HEADERS.items() if isinstance(exc, cls)), None)
    return problem(status, type(exc).__name__, detail, headers, **extra)


async def database_outage(request: Request, exc: Exception) -> JSONResponse:
    """The database is down or restarting: a 503 the client may retry, never a 500."""
    if not is_outage(exc):
        raise exc  # a bug, not an outage: the server's own 500, logged
    detail = (
        f"the database is unavailable ({type(exc).__name__}); retry shortly. Sending a record "
        "again with the same context_id is safe: an identical replay is a no-op"
    )
    return problem(503, "StoreUnavailable", detail, HEADERS[StoreUnavailable])


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    where = "; ".join(
        f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors()
    )
    return problem(422, "InvalidRequest", where or "the request is malformed", rule="bad_request")


async def unstorable_text(request: Request, exc: Exception) -> JSONResponse:
    """A NUL (or a character the database encoding lacks) in a parameter: the caller's to fix."""
    detail = "a parameter holds a character PostgreSQL cannot store (such as \\u0000): remove it"
    return problem(422, "InvalidRequest", detail, rule="unstorable_character")


# Bad input that reaches code which cannot take it: each a 422 naming the rule, raised before
# anything commits (the transaction it broke is rolled back).
INPUT_ERRORS: dict[type[Exception], tuple[str, str]] = {
    UnicodeEncodeError: (
        "unpaired_surrogate",
        "a string holds a lone UTF-16 surrogate (such as \\ud800), which is not text: send "
        "valid Unicode",
    ),
    RecursionError: ("too_deep", "the JSON nests too deeply: flatten it"),
    OverflowError: (
        "out_of_range",
        "a number or date is out of the range the service stores (dates between the years 1 "
        "and 9999 in UTC, integers of 64 bits)",
    ),
}


async def unusable_input(request: Request, exc: Exception) -> JSONResponse:
    rule, detail = next(found for cls, found in INPUT_ERRORS.items() if isinstance(exc, cls))
    return problem(422, "InvalidRequest", detail, rule=rule)


async def unencodable_argument(request: Request, exc: Exception) -> JSONResponse:
    """A value the database driver could not send (asyncpg's DataError: a lone surrogate, a
    date past the year 9999 or before 1 once in UTC, ...): the caller's to fix."""
    cause = exc.__cause__ or exc.__context__
    for cls, (rule, detail) in INPUT_ERRORS.items():
        if isinstance(cause, cls) or (cls is OverflowError and "out of range" in str(exc)):
            return problem(422, "InvalidRequest", detail, rule=rule)
    reason = str(exc).rpartition("(")[2].rstrip(")") or "a value cannot be stored"
    return problem(422, "InvalidRequest", reason[:200], rule="unstorable_value")


def install(app: FastAPI) -> None:
    app.add_exception_handler(LineageError, lineage_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    for unusable in INPUT_ERRORS:
        app.add_exception_handler(unusable, unusable_input)
    app.add_exception_handler(asyncpg.DataError, unencodable_argument)
    for unstorable in (asyncpg.CharacterNotInRepertoireError, asyncpg.UntranslatableCharacterError):
        app.add_exception_handler(unstorable, unstorable_text)
    for outage in (*OUTAGE_ERRORS, asyncpg.InterfaceError):
        app.add_exception_handler(outage, database_outage)
