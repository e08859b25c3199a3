"""Overload is shed, not queued: past LINEAGE_MAX_CONCURRENT_REQUESTS requests in flight, the
next one gets 429 with Retry-After at once; probes and event streams are never shed; and a
client of the SDK keeps a shed record in its spool until the service takes it."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from lineage.api.app import create_app
from lineage.core.errors import StoreUnavailable
from lineage.core.hashing import content_hash
from lineage.core.record import NewContext
from lineage.settings import Settings
from lineage.store import HttpStore
from lineage.store.spool import Replay, SpoolingStore
from tests import live_server

# Guards against a hang, not a timing assertion: a correct service answers long before.
HANG_GUARD_S = 30.0


def document(context_id: str) -> dict[str, str]:
    return {"context_id": context_id, "kind": "document", "source_uri": f"s3://{context_id}.md"}


@asynccontextmanager
async def serving(settings: Settings, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as http:
            yield http


async def waiting_on_a_lock(watcher: asyncpg.Connection) -> None:
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND datname = current_database()"
    )
    while True:
        if await watcher.fetchval(query):
            return
        await asyncio.sleep(0.01)


@asynccontextmanager
async def request_in_flight(http: httpx.AsyncClient, database_url: str) -> AsyncIterator[None]:
    """A POST that stays in flight until the block ends: its insert waits on a table lock held
    by another connection (a body still arriving does not count as in flight)."""
    locker = await asyncpg.connect(database_url)
    watcher = await asyncpg.connect(database_url)
    try:
        locking = locker.transaction()
        await locking.start()
        await locker.execute("LOCK TABLE provenance IN EXCLUSIVE MODE")
        held = asyncio.create_task(
            http.post("/v1/contexts", json={**document("doc_held"), "text": "held"})
        )
        try:
            async with asyncio.timeout(HANG_GUARD_S):
                await waiting_on_a_lock(watcher)
            yield
        finally:
            await locking.rollback()
            response = await held
        assert response.status_code == 201, response.text
    finally:
        await locker.close()
        await watcher.close()


async def test_a_request_past_the_cap_gets_429_at_once_and_nothing_is_done(
    database_url: str,
) -> None:
    # A bad-request limit of 1 shows that a shed request is not held against its caller.
    settings = Settings(auth="none", max_concurrent_requests=1, bad_request_limit=1)
    async with serving(settings, database_url) as http:
        async with request_in_flight(http, database_url):
            refused = await http.post("/v1/contexts", json={**document("doc_late"), "text": "t"})
            assert refused.status_code == 429
            assert refused.headers["retry-after"] == "1"
            assert refused.headers["content-type"] == "application/problem+json"
            assert refused.headers["x-trace-id"]
            problem = refused.json()
            assert problem["title"] == "Overloaded"
            assert "LINEAGE_MAX_CONCURRENT_REQUESTS" in problem["detail"]
            assert "send the same request again" in problem["detail"]
            for probe in ("/healthz", "/readyz", "/metrics"):
                assert (await http.get(probe)).status_code == 200, probe
        assert (await http.get("/v1/contexts/doc_late")).status_code == 404
        again = await http.post("/v1/contexts", json={**document("doc_late"), "text": "t"})
        assert again.status_code == 201  # created now: the refused request stored nothing


async def test_zero_means_no_cap(database_url: str) -> None:
    settings = Settings(auth="none", max_concurrent_requests=0)
    async with serving(settings, database_url) as http, request_in_flight(http, database_url):
        answer = await http.get("/v1/contexts/doc_free")  # a read: the table lock allows it
        assert answer.status_code == 404


def test_the_cap_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LINEAGE_MAX_CONCURRENT_REQUESTS", "7")
    assert Settings().max_concurrent_requests == 7
    monkeypatch.setenv("LINEAGE_MAX_CONCURRENT_REQUESTS", "-1")
    with pytest.raises(ValueError, match="max_concurrent_requests"):
        Settings()


async def test_open_event_streams_neither_count_nor_get_shed(database_url: str) -> None:
    settings = Settings(auth="none", max_concurrent_requests=1)
    app = create_app(settings, database_url=database_url)
    with live_server.serve(app) as url:
        async with (
            httpx.AsyncClient(base_url=url, timeout=HANG_GUARD_S) as http,
            http.stream("GET", "/v1/events") as first,
            http.stream("GET", "/v1/events") as second,
        ):
            assert first.status_code == second.status_code == 200
            answer = await http.post("/v1/contexts", json={**document("doc_live"), "text": "t"})
            assert answer.status_code == 201, answer.text


async def test_the_sdk_spools_a_shed_record_and_stores_it_once_when_replayed(
    database_url: str, owner: asyncpg.Connection, tmp_path: Path
) -> None:
    settings = Settings(auth="none", max_concurrent_requests=1)
    proposal = NewContext(
        context_id="doc_sdk",
        kind="document",
        source_uri="s3://sdk.md",
        content_hash=content_hash("x"),
    )
    async with serving(settings, database_url) as http:
        direct = HttpStore("http://lineage", client=http)
        spooling = SpoolingStore(direct, tmp_path)
        try:
            async with request_in_flight(http, database_url):
                with pytest.raises(StoreUnavailable, match="429"):
                    await direct.append([proposal])
                [appended] = await spooling.append([proposal])
                assert appended.spooled
            assert await spooling.replay() == Replay(1, 0, 0, None)
        finally:
            await spooling.aclose()
    stored = await owner.fetchval("SELECT count(*) FROM provenance WHERE context_id = 'doc_sdk'")
    assert stored == 1
