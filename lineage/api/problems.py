"""Every error the API answers, as application/problem+json, in one place: a LineageError carries
its status, title and rule (lineage/core/errors.py); what the framework, the driver or Python
raise for bad input or an outage is first turned into one."""

from http import HTTPStatus
from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.routing import compile_path

from lineage.api.models import Problem
from lineage.api.results import Json
from lineage.core import telemetry
from lineage.core.errors import InvalidRequest, LineageError, StoreUnavailable
from lineage.db.errors import OUTAGE_ERRORS, is_outage

PROBLEM = "application/problem+json"


def problem(
    status: int, title: str, detail: str, headers: dict[str, str] | None = None, **extra: Any
) -> Json:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    # The request's trace id (lineage.api.logs), so a reported error can be found in the logs.
    if (trace_id := telemetry.current_trace_id()) is not None:
        body.setdefault("trace_id", trace_id)
    return Json(body, status_code=status, media_type=PROBLEM, headers=headers)


def answer(exc: LineageError, headers: dict[str, str] | None = None) -> Json:
    """The problem for an error; `headers` add to the class's own (a Retry-After, a close)."""
    return problem(
        exc.status,
        exc.title or type(exc).__name__,
        exc.detail,
        {**exc.headers, **(headers or {})} or None,
        rule=exc.rule,
    )


async def lineage_error(request: Request, exc: Exception) -> Json:
    assert isinstance(exc, LineageError)
    return answer(exc)


async def database_outage(request: Request, exc: Exception) -> Json:
    """The database is down or restarting: a 503 the client may retry, never a 500."""
    if not is_outage(exc):
        raise exc  # a bug, not an outage: the server's own 500, logged
    return answer(
        StoreUnavailable(
            f"the database is unavailable ({type(exc).__name__}); retry shortly. Sending a "
            "record again with the same context_id is safe: an identical replay is a no-op"
        )
    )


async def validation_error(request: Request, exc: Exception) -> Json:
    assert isinstance(exc, RequestValidationError)
    where = "; ".join(
        f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in exc.errors()
    )
    return answer(InvalidRequest("bad_request", where or "the request is malformed"))


async def no_route(request: Request, exc: Exception) -> Json:
    """A path or method the API does not have (the router's own 404 and 405)."""
    assert isinstance(exc, HTTPException)
    phrase = HTTPStatus(exc.status_code).phrase
    headers = dict(exc.headers or {})
    if exc.status_code == HTTPStatus.METHOD_NOT_ALLOWED and (methods := _documented(request)):
        # The router names the methods of the path's first route only; each method of a path
        # is a route of its own, some in other routers.
        headers["Allow"] = ", ".join(methods)
    return problem(
        exc.status_code,
        phrase.title().replace(" ", ""),
        f"{request.method} {request.url.path}: {exc.detail}",
        headers or None,
        rule=phrase.lower().replace(" ", "_"),
    )


def _documented(request: Request) -> list[str]:
    """Every method the OpenAPI document gives the request's path; where a path without
    parameters names it (/v1/contexts/batch), that path's alone, as OpenAPI matches paths."""
    paths: dict[str, dict[str, Any]] = request.app.openapi()["paths"]
    exact = paths.get(request.url.path)
    if exact is not None:
        return sorted(method.upper() for method in exact)
    methods: set[str] = set()
    for template, operations in paths.items():
        if compile_path(template)[0].fullmatch(request.url.path):
            methods |= {method.upper() for method in operations}
    return sorted(methods)


async def unstorable_text(request: Request, exc: Exception) -> Json:
    """A NUL (or a character the database encoding lacks) in a parameter: the caller's to fix."""
    detail = "a parameter holds a character PostgreSQL cannot store (such as \\u0000): remove it"
    return answer(InvalidRequest("unstorable_character", detail))


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


async def unusable_input(request: Request, exc: Exception) -> Json:
    rule, detail = next(found for cls, found in INPUT_ERRORS.items() if isinstance(exc, cls))
    return answer(InvalidRequest(rule, detail))


async def unencodable_argument(request: Request, exc: Exception) -> Json:
    """A value the database driver could not send (asyncpg's DataError: a lone surrogate, a
    date past the year 9999 or before 1 once in UTC, ...): the caller's to fix."""
    cause = exc.__cause__ or exc.__context__
    for cls, (rule, detail) in INPUT_ERRORS.items():
        if isinstance(cause, cls) or (cls is OverflowError and "out of range" in str(exc)):
            return answer(InvalidRequest(rule, detail))
    reason = str(exc).rpartition("(")[2].rstrip(")") or "a value cannot be stored"
    return answer(InvalidRequest("unstorable_value", reason[:200]))


# Documented on every operation, besides the statuses a route names itself (all problems).
PROBLEM_STATUSES = {
    "4XX": "refused: `detail` says what to fix, `rule` names the rule (nothing was written)",
    "5XX": "the service could not answer; a 503 (Retry-After) can be retried as it is",
}


def _document_refusals(responses: dict[str, Any], security: list[dict[str, list[str]]]) -> None:
    """An operation that needs a key answers 401 without a valid one, 403 when its scope falls
    short (the scopes each requirement lists)."""
    scopes = sorted(
        {s for requirement in security for named in requirement.values() for s in named}
    )
    needs = f"scope {' or '.join(scopes)}" if scopes else "this operation"
    responses.setdefault(
        "401", {"description": "no key, or one that is malformed, unknown or revoked"}
    )
    responses.setdefault("403", {"description": f"the key is valid but does not grant {needs}"})


def document(app: FastAPI) -> None:
    """Errors documented as they are sent: problem+json for every 4xx and 5xx, in place of the
    validation-error shape FastAPI documents by default and this API never sends."""
    generate = app.openapi
    content = {PROBLEM: {"schema": {"$ref": "#/components/schemas/Problem"}}}

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()  # cached on the app: changed in place, once
        for operations in schema["paths"].values():
            for operation in operations.values():
                responses = operation["responses"]
                responses.pop("422", None)
                if "security" in operation:
                    _document_refusals(responses, operation["security"])
                for status, description in PROBLEM_STATUSES.items():
                    responses.setdefault(status, {"description": description})
                for status, response in responses.items():
                    if status[0] in "45":
                        response["content"] = content
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        for unsent in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unsent, None)
        schemas["Problem"] = Problem.model_json_schema()
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def install(app: FastAPI) -> None:
    document(app)
    app.add_exception_handler(LineageError, lineage_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, no_route)
    for unusable in INPUT_ERRORS:
        app.add_exception_handler(unusable, unusable_input)
    app.add_exception_handler(asyncpg.DataError, unencodable_argument)
    for unstorable in (asyncpg.CharacterNotInRepertoireError, asyncpg.UntranslatableCharacterError):
        app.add_exception_handler(unstorable, unstorable_text)
    # An internal error is an outage only when a shard moved (is_outage); else the 500 stays.
    for outage in (*OUTAGE_ERRORS, asyncpg.InterfaceError, asyncpg.InternalServerError):
        app.add_exception_handler(outage, database_outage)
