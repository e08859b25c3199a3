"""The app factory: its lifespan owns the pool; nothing connects at import time."""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response

from lineage import db, signing
from lineage.api import logs, problems
from lineage.api.limits import BadRequestCap, identity
from lineage.api.routes import (
    admin,
    answers,
    contexts,
    events,
    exports,
    health,
    impact,
    metrics,
    openlineage,
    privacy,
    spans,
    traces,
    ui,
)
from lineage.api.routes import log as log_routes
from lineage.settings import Settings, effective_auth
from lineage.verifiable_log import storage as log_storage

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, database_url: str | None = None) -> FastAPI:
    """`database_url` overrides the settings (tests hand in their own database)."""
    chosen = settings or Settings()
    auth = effective_auth(chosen, embedded=database_url is None and chosen.database_url is None)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        url = database_url or db.database_url(chosen)
        app.state.signer = signing.signer_for(chosen)  # before connecting: a bad keyring stops here
        app.state.pool = await db.create_pool(url)
        app.state.events = events.EventListener(url)
        if auth == "none":
            log.warning(
                "authentication is off (LINEAGE_AUTH=none): every request acts as tenant "
                "'default'; set LINEAGE_AUTH=keys before exposing this service"
            )
        else:
            log.info("authentication: bearer keys (LINEAGE_AUTH=keys)")
        try:
            async with log_storage.background(app.state.pool, chosen):
                yield
        finally:
            await app.state.events.close()
            await app.state.pool.close()

    app = FastAPI(
        title="lineage",
        summary="Walk a wrong answer back to its sources; find everything a document fed.",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.settings = chosen
    app.state.auth = auth
    problems.install(app)

    @app.middleware("http")
    async def limit_body(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > chosen.max_body_bytes:
            return problems.problem(
                413,
                "BodyTooLarge",
                f"body is {length} bytes; at most {chosen.max_body_bytes}: split the batch",
            )
        return await call_next(request)

    # Outermost, so that the 413s above count too.
    cap = BadRequestCap(chosen.bad_request_limit, chosen.bad_request_window_s)

    @app.middleware("http")
    async def cap_bad_requests(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        who = identity(request)
        wait = cap.retry_after(who)
        if wait is not None:
            return problems.problem(
                429,
                "TooManyRequests",
                f"more than {cap.limit} bad requests in {cap.window_s:g} s from this key or "
                "address; fix the requests (see the earlier 4xx details) and retry later",
                {"Retry-After": str(wait)},
            )
        response = await call_next(request)
        cap.note(who, response.status_code)
        return response

    # Outermost of all: every response and log line of a request carries its trace id.
    app.add_middleware(logs.TraceIdMiddleware)

    for module in (
        health,
        contexts,
        impact,
        traces,
        answers,
        admin,
        privacy,
        ui,
        log_routes,
        exports,
        openlineage,
        events,
        spans,
        metrics,
    ):
        app.include_router(module.router)
    return app
