"""The live event stream (GET /v1/events) against a real uvicorn server: records arrive as they
commit, confined to the caller's tenant, filtered, and a reconnect with Last-Event-ID misses
nothing, even when transactions commit in another order than they were given ids."""

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY

from lineage import db, derive
from lineage.api.app import create_app
from lineage.api.routes.events import EventListener, Position, read_after
from lineage.core.derive import Derivation, propose
from lineage.services import auth
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore, append_records
from tests import live_server

TENANT = "default"
# Guards against a hang, not a timing assertion: a correct stream answers long before.
HANG_GUARD_S = 30.0


@pytest.fixture
def live_url(database_url: str, settings: Settings) -> Iterator[str]:
    with live_server.serve(create_app(settings, database_url=database_url)) as url:
        yield url


@pytest.fixture
async def http(live_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=live_url, timeout=HANG_GUARD_S) as client:
        yield client


class EventReader:
    """The events of one streamed response, as (id, record); comments are skipped."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.aiter_lines()

    async def next(self) -> tuple[str, dict[str, Any]]:
        fields: dict[str, str] = {}
        async with asyncio.timeout(HANG_GUARD_S):
            async for line in self.lines:
                if line == "":
                    if "data" in fields:
                        return fields["id"], json.loads(fields["data"])
                    fields = {}
                elif not line.startswith(":"):
                    name, _, value = line.partition(":")
                    fields[name] = value.removeprefix(" ")
        raise AssertionError("the stream ended")

    async def ids(self, count: int) -> list[str]:
        return [(await self.next())[1]["context_id"] for _ in range(count)]


@asynccontextmanager
async def open_stream(
    http: httpx.AsyncClient, headers: dict[str, str] | None = None, **params: str
) -> AsyncIterator[EventReader]:
    async with http.stream("GET", "/v1/events", params=params, headers=headers) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield EventReader(response)


def doc(name: str) -> Derivation:
    # Its own transform: concurrent transactions noting the same new version would wait on
    # each other's row in transform_versions.
    return Derivation([], f"text of {name}", "document", name, "1", source_uri=f"s3://{name}")


async def append(connection: asyncpg.Connection, name: str) -> str:
    [appended] = await append_records(connection, TENANT, [propose(TENANT, doc(name))])
    return appended.record.context_id


async def read_all(pool: asyncpg.Pool, after: Position, count: int) -> list[str]:
    """Page after page as a stream reads them, until `count` records have come."""
    found: list[str] = []
    async with asyncio.timeout(HANG_GUARD_S):
        while len(found) < count:
            records, after = await read_after(pool, TENANT, after, "any", "any")
            found += [record["context_id"] for record in records]
            # Write transactions elsewhere on the server can hold the horizon back a moment.
            await asyncio.sleep(0 if records else 0.05)
    return found


async def test_new_records_arrive_as_they_commit_with_their_fields(
    http: httpx.AsyncClient, store: PostgresStore
) -> None:
    before = await derive(store, [], "old", "document", "loader", "1", source_uri="s3://old")
    async with open_stream(http) as events:
        parent = await derive(store, [], "a", "document", "loader", "1", source_uri="s3://a")
        child = await derive(store, [parent], "b", "chunk", "chunker", "2", trace_id="ab" * 16)
        first_id, first = await events.next()
        if first["context_id"] == before.context_id:
            # It committed while an older transaction elsewhere on the server still ran: a
            # stream without Last-Event-ID starts at the oldest running transaction.
            first_id, first = await events.next()
        second_id, second = await events.next()
    assert first["context_id"] == parent.context_id
    assert second == {
        "context_id": child.context_id,
        "kind": "chunk",
        "parent_ids": [parent.context_id],
        "source_uri": None,
        "content_hash": child.record.content_hash,
        "transform": "chunker",
        "transform_version": "chunker@2",
        "produced_by": None,
        "index_snapshot": None,
        "trace_id": "ab" * 16,
        "created_at": second["created_at"],
        "attributes": {},
    }
    assert Position(*map(int, first_id.split("-"))) < Position(*map(int, second_id.split("-")))


async def test_last_event_id_zero_replays_and_a_stranger_id_is_refused(
    http: httpx.AsyncClient, store: PostgresStore
) -> None:
    old = await derive(store, [], "old", "document", "loader", "1", source_uri="s3://old")
    async with open_stream(http, {"Last-Event-ID": "0"}) as events:
        assert await events.ids(1) == [old.context_id]
    response = await http.get("/v1/events", headers={"Last-Event-ID": "yesterday"})
    assert response.status_code == 422
    assert "Last-Event-ID 'yesterday'" in response.json()["detail"]


async def test_a_transaction_that_started_first_and_commits_last_is_not_skipped(
    http: httpx.AsyncClient, pool: asyncpg.Pool
) -> None:
    start = Position(0, 0)
    async with open_stream(http) as events:
        async with db.transaction(pool, TENANT) as first:
            early = await append(first, "early")
            async with db.transaction(pool, TENANT) as second:
                started_later = await append(second, "started_later")
            # The second has committed; the first, holding an earlier id, has not: nothing may
            # be sent yet, or a reader past the later one would never see the earlier one.
            held_back, _ = await read_after(pool, TENANT, start, "any", "any")
            assert held_back == []
            early_too = await append(first, "early_too")
        assert await read_all(pool, start, 3) == [early, early_too, started_later]
        assert await events.ids(3) == [early, early_too, started_later]


async def test_reconnecting_with_last_event_id_gets_a_record_that_committed_late_with_a_smaller_id(
    http: httpx.AsyncClient, pool: asyncpg.Pool
) -> None:
    async with AsyncExitStack() as second_transaction:
        async with open_stream(http) as events:
            async with db.transaction(pool, TENANT) as first:
                early = await append(first, "early")
                second = await second_transaction.enter_async_context(db.transaction(pool, TENANT))
                smaller_id = await append(second, "smaller_id")
                larger_id = await append(first, "larger_id")
            # The first committed with event ids on both sides of the open second's.
            early_event, _ = await events.next()
            last_event_id, record = await events.next()
            assert record["context_id"] == larger_id
        assert int(early_event.split("-")[1]) < int(last_event_id.split("-")[1])
        # The client is gone; now the second commits.
    async with open_stream(http, {"Last-Event-ID": last_event_id}) as events:
        assert await events.ids(1) == [smaller_id]
    assert early != smaller_id


async def test_each_tenant_streams_only_its_own_records(
    database_url: str, pool: asyncpg.Pool, settings: Settings
) -> None:
    owner_pool = await db.create_pool(database_url, max_size=1, as_owner=True)
    tokens = {}
    for tenant in ("acme", "rival"):
        await auth.create_tenant(owner_pool, tenant)
        tokens[tenant], _ = await auth.create_key(pool, tenant, "read")
    await owner_pool.close()
    keyed = settings.model_copy(update={"auth": "keys"})
    with live_server.serve(create_app(keyed, database_url=database_url)) as url:
        async with (
            httpx.AsyncClient(base_url=url, timeout=HANG_GUARD_S) as http,
            open_stream(http, {"Authorization": f"Bearer {tokens['acme']}"}) as acme,
            open_stream(http, {"Authorization": f"Bearer {tokens['rival']}"}) as rival,
        ):
            rivals = await derive(PostgresStore(pool, "rival"), [], "r", "document", "l", "1",
                                  source_uri="s3://r")  # fmt: skip
            acmes = await derive(PostgresStore(pool, "acme"), [], "a", "document", "l", "1",
                                 source_uri="s3://a")  # fmt: skip
            assert await acme.ids(1) == [acmes.context_id]
            assert await rival.ids(1) == [rivals.context_id]


async def test_filters_by_trace_and_by_session(
    http: httpx.AsyncClient, store: PostgresStore, pool: asyncpg.Pool
) -> None:
    trace = "cd" * 16
    async with (
        open_stream(http, trace_id=trace) as by_trace,
        open_stream(http, session_id="sess_7") as by_session,
    ):
        root = await derive(store, [], "q", "query", "user", "1", source_uri="chat://1")
        in_session = await derive(
            store, [root], "r", "reasoning", "agent", "1", attributes={"session_id": "sess_7"}
        )
        in_trace = await derive(store, [root], "p", "plan", "agent", "1", trace_id=trace)
        assert await by_trace.ids(1) == [in_trace.context_id]
        assert await by_session.ids(1) == [in_session.context_id]
    # Records the filter passed over move the position on, so they are not read again.
    records, position = await read_after(pool, TENANT, Position(0, 0), "none" * 8, "any")
    assert records == [] and position > Position(0, 0)


async def test_a_commit_notifies_the_listening_streams_of_its_tenant_only(
    database_url: str, store: PostgresStore
) -> None:
    listener = EventListener(database_url)
    await listener.listen()
    try:
        async with listener.subscribe(TENANT) as ours, listener.subscribe("rival") as theirs:
            await derive(store, [], "n", "document", "loader", "1", source_uri="s3://n")
            async with asyncio.timeout(HANG_GUARD_S):
                await ours.wait()
            assert not theirs.is_set()
    finally:
        await listener.close()


def open_streams() -> float:
    return REGISTRY.get_sample_value("lineage_event_streams") or 0.0


async def test_a_stream_whose_client_left_ends(http: httpx.AsyncClient) -> None:
    assert open_streams() == 0
    async with open_stream(http) as reader:
        # Headers can leave before the stream starts; its first comment comes after it has.
        async with asyncio.timeout(HANG_GUARD_S):
            assert (await anext(reader.lines)).startswith(": stream open")
        assert open_streams() == 1
    for _ in range(int(HANG_GUARD_S / 0.05)):  # the server notices the close on its own time
        if open_streams() == 0:
            break
        await asyncio.sleep(0.05)
    assert open_streams() == 0
