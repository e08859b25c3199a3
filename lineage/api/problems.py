"""Errors as application/problem+json, mapped from error classes in one place."""

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from lineage.errors import (
    BadParameter,
    Conflict,
    InvalidRecord,
    LineageError,
    NotFound,
    StoreUnavailable,
    WalkTimeout,
)

STATUS = {
    InvalidRecord: 422,
    BadParameter: 422,
    NotFound: 404,
    Conflict: 409,
    WalkTimeout: 503,
    StoreUnavailable: 503,
}


def problem(status: int, title: str, detail: str, **extra: Any) -> JSONResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    return JSONResponse(body, status_code=status, media_type="application/problem+json")


async def lineage_error(request: Request, exc: Exception) -> JSONResponse:
    status = next((code for cls, code in STATUS.items() if isinstance(exc, cls)), 500)
    extra = {"rule": exc.rule} if isinstance(exc, InvalidRecord) else {}
    detail = exc.message if isinstance(exc, InvalidRecord) else str(exc)
    return problem(status, type(exc).__name__, detail, **extra)


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    where = "; ".join(
        f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors()
    )
    return problem(422, "InvalidRequest", where or "the request is malformed", rule="bad_request")


def install(app: FastAPI) -> None:
    app.add_exception_handler(LineageError, lineage_error)
    app.add_exception_handler(RequestValidationError, validation_error)
