"""The app factory: its lifespan owns the pool; nothing connects at import time."""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request, Response

from lineage import db
from lineage.api import problems
from lineage.api.routes import answers, contexts, health, impact, traces
from lineage.settings import Settings

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, database_url: str | None = None) -> FastAPI:
    """`database_url` overrides the settings (tests hand in their own database)."""
    chosen = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        url = database_url or db.database_url(chosen)
        app.state.pool = await db.create_pool(url)
        try:
            yield
        finally:
            await app.state.pool.close()

    app = FastAPI(
        title="lineage",
        summary="Walk a wrong answer back to its sources; find everything a document fed.",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.settings = chosen
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

    for module in (health, contexts, impact, traces, answers):
        app.include_router(module.router)
    return app
