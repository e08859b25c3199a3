"""The app factory: its lifespan owns the one Database; nothing connects at import time."""

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress

from fastapi import Depends, FastAPI

from lineage import db
from lineage.api import logs, problems
from lineage.api.connections import guard_connections
from lineage.api.deps import refuse_unknown_query_parameters
from lineage.api.fairness import FairShares
from lineage.api.limits import BadRequestCap, CapBadRequests, LimitBody, ShedOverload
from lineage.api.routes import (
    admin,
    answers,
    contexts,
    docs,
    events,
    exports,
    health,
    impact,
    login,
    metrics,
    openlineage,
    otlp,
    privacy,
    queries,
    spans,
    traces,
    ui,
)
from lineage.api.routes import log as log_routes
from lineage.claims.judges import judge_from_settings
from lineage.claims.sampling import Sampler
from lineage.core import offload, tasks
from lineage.core.metrics import process_ended
from lineage.db import keyring
from lineage.db.database import Database
from lineage.db.migrate import migrate as upgrade
from lineage.services import audit, retention
from lineage.services.coalesce import AppendCoalescer
from lineage.services.events import EventListener
from lineage.services.key_cache import KeyCache
from lineage.settings import Settings, effective_auth
from lineage.verifiable_log import storage as log_storage

log = logging.getLogger(__name__)

CONNECT_RETRY_MAX_S = 10.0


async def _connect(
    app: FastAPI,
    url: str,
    settings: Settings,
    signer: keyring.Signer,
    running: AsyncExitStack,
    retry: bool,
) -> None:
    """Connect (and migrate, when retrying for `lineage serve`), then start the log's rounds."""
    delay = 0.5
    while True:
        try:
            if retry:
                await asyncio.to_thread(upgrade, url)
            database = await Database.connect(settings, url, signer=signer)
            if database.has_replica:
                log.info("reads go to the replica named by LINEAGE_READ_DATABASE_URL")
            break
        except Exception as exc:
            if not retry:
                raise
            app.state.not_ready = f"the database is not reachable yet ({type(exc).__name__})"
            log.warning("%s: %s; retrying in %.1f s", app.state.not_ready, exc, delay)
            await asyncio.sleep(delay)
            delay = min(CONNECT_RETRY_MAX_S, delay * 2)
    running.push_async_callback(database.close)
    if app.state.auth == "keys":
        await app.state.keys.listen()
    await running.enter_async_context(log_storage.background(database, settings))
    if settings.retention_schedule:
        await running.enter_async_context(retention.scheduled(database))
    audit_drain = asyncio.create_task(audit.drain_forever(database, settings), name="audit-drain")
    running.push_async_callback(tasks.stop, audit_drain)
    app.state.db = database
    app.state.not_ready = None
    log.info("connected to the database")


def create_app(
    settings: Settings | None = None,
    database_url: str | None = None,
    *,
    migrate_first: bool = False,
) -> FastAPI:
    """`database_url` overrides the settings (tests hand in their own database).
    `migrate_first` (`lineage serve`): start serving at once, and migrate and connect in the
    background, retrying while the database is down; /readyz is 503 until it is done."""
    chosen = settings or Settings()
    auth = effective_auth(chosen, embedded=database_url is None and chosen.database_url is None)
    guard_connections(chosen)  # this process's connections, however the app is served

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        url = database_url or db.database_url(chosen)
        signer = keyring.signer_for(chosen)  # before connecting: a bad keyring stops here
        app.state.db = None  # until connected: /readyz and every data route answer 503
        app.state.not_ready = "connecting to the database"
        # On the primary: a hot standby cannot LISTEN, and commits notify where they happen.
        app.state.events = EventListener(url)
        app.state.keys = KeyCache(url)
        app.state.sampler = Sampler(
            chosen.sample_share,
            chosen.sample_queue,
            lambda: getattr(app.state, "claim_judge", None) or judge_from_settings(chosen),
            lambda: app.state.db,
        )
        if auth == "none":
            log.warning(
                "authentication is off (LINEAGE_AUTH=none): every request acts as tenant "
                "'default'; set LINEAGE_AUTH=keys before exposing this service"
            )
        else:
            log.info("authentication: bearer keys (LINEAGE_AUTH=keys)")
        async with AsyncExitStack() as running:
            running.callback(process_ended)
            running.callback(offload.stop_heavy_pool)
            running.push_async_callback(app.state.events.close)
            running.push_async_callback(app.state.keys.close)
            app.state.sampler.start()
            running.push_async_callback(app.state.sampler.stop)
            connecting = asyncio.create_task(
                _connect(app, url, chosen, signer, running, migrate_first), name="connect"
            )
            try:
                if not migrate_first:  # a test's or embedder's database: up, or fail at once
                    await connecting
                yield
            finally:
                connecting.cancel()
                with suppress(asyncio.CancelledError):
                    await connecting

    app = FastAPI(
        title="lineage",
        summary="Walk a wrong answer back to its sources; find everything a document fed.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # routes/docs.py serves /docs and /redoc without a CDN
        redoc_url=None,
        dependencies=[Depends(refuse_unknown_query_parameters)],
    )
    app.state.settings = chosen
    app.state.auth = auth
    app.state.appends = AppendCoalescer()
    app.state.fair_shares = FairShares(chosen)
    problems.install(app)

    # Each add_middleware wraps the ones before it: the last added sees a request first.
    # Innermost: only a request whose body is read and whose caller is verified counts.
    app.add_middleware(ShedOverload, limit=chosen.max_concurrent_requests)
    app.add_middleware(
        LimitBody,
        max_body_bytes=chosen.max_body_bytes,
        read_timeout_s=chosen.body_read_timeout_s,
    )
    # Outside LimitBody, so that its 413s and 408s count as bad requests too.
    app.add_middleware(
        CapBadRequests, cap=BadRequestCap(chosen.bad_request_limit, chosen.bad_request_window_s)
    )
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
        login,
        log_routes,
        exports,
        openlineage,
        otlp,
        queries,
        events,
        spans,
        metrics,
        docs,
    ):
        app.include_router(module.router)
    return app
