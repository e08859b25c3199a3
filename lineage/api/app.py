"""The app factory: its lifespan owns the pool; nothing connects at import time."""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from lineage import db
from lineage.api import logs, problems
from lineage.api.limits import BadRequestCap, CapBadRequests, LimitBody, ShedOverload
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
from lineage.services import signing
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

    # Each add_middleware wraps the ones before it: the last added sees a request first.
    app.add_middleware(LimitBody, max_body_bytes=chosen.max_body_bytes)
    # Outside LimitBody, so that its 413s count as bad requests too.
    app.add_middleware(
        CapBadRequests, cap=BadRequestCap(chosen.bad_request_limit, chosen.bad_request_window_s)
    )
    app.add_middleware(ShedOverload, limit=chosen.max_concurrent_requests)
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
