"""The live event stream (GET /v1/events) against a real uvicorn server: records arrive as they
commit, confined to the caller's tenant, filtered, numbered per tenant in commit order, and a
reconnect with Last-Event-ID misses nothing; a transaction elsewhere on the server holds no
stream back."""

import asyncio
import gc
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY

from lineage import db, derive
from lineage.api.app import create_app
from lineage.core.derive import Derivation, propose
from lineage.db.database import Database, Transaction
from lineage.services import auth, events
from lineage.services.appends import append_records
from lineage.services.events import EventListener, read_after
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests import live_server
from tests.conftest import janitor, url_for

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


async def append(database: Database, connection: asyncpg.Connection, name: str) -> str:
    """Append in the transaction open on `connection`, signed with the database's keyring."""
    tx = Transaction(database, connection, TENANT)
    [appended] = await append_records(tx, [propose(TENANT, doc(name))])
    return appended.record.context_id


async def read_all(database: Database, after: int, count: int) -> list[str]:
    """Page after page as a stream reads them, until `count` records have come."""
    found: list[str] = []
    async with asyncio.timeout(HANG_GUARD_S):
        while len(found) < count:
            records, after = await read_after(database, TENANT, after, "any", "any")
            found += [record["context_id"] for record in records]
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
        second_id, second = await events.next()
    assert first["context_id"] == parent.context_id != before.context_id
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
    assert (int(first_id), int(second_id)) == (2, 3)  # the tenant's second and third record


async def test_last_event_id_zero_replays_and_a_stranger_id_is_refused(
    http: httpx.AsyncClient, store: PostgresStore
) -> None:
    old = await derive(store, [], "old", "document", "loader", "1", source_uri="s3://old")
    async with open_stream(http, {"Last-Event-ID": "0"}) as events:
        assert await events.ids(1) == [old.context_id]
    for stranger in ("yesterday", "9" * 19, "-1"):
        response = await http.get("/v1/events", headers={"Last-Event-ID": stranger})
        assert response.status_code == 422
        assert f"Last-Event-ID {stranger!r} is not an id" in response.json()["detail"]
    # A position of the (transaction id, event id) kind, sent before this version.
    response = await http.get("/v1/events", headers={"Last-Event-ID": "7510-12"})
    assert response.status_code == 422
    assert "before positions were counted per tenant" in response.json()["detail"]


async def wait_until_it_waits_for_a_lock(owner: asyncpg.Connection, pid: int) -> None:
    query = "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1"
    for _ in range(int(HANG_GUARD_S / 0.01)):
        if await owner.fetchval(query, pid) == "Lock":
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the second append never waited for the first transaction")


async def test_a_tenants_appends_are_numbered_in_commit_order(
    http: httpx.AsyncClient, pool: asyncpg.Pool, database: Database, owner: asyncpg.Connection
) -> None:
    async with open_stream(http) as events, pool.acquire() as second:
        async with db.transaction(pool, TENANT) as first:
            early = await append(database, first, "early")
            later = asyncio.create_task(append_in_own_transaction(database, second, "later"))
            # The second append waits for the first transaction: it cannot take a position
            # before it, so nothing can commit behind a position a reader has passed.
            await wait_until_it_waits_for_a_lock(owner, second.get_server_pid())
            assert not later.done()
            assert (await read_after(database, TENANT, 0, "any", "any")) == ([], 0)
            early_too = await append(database, first, "early_too")
        async with asyncio.timeout(HANG_GUARD_S):
            later_id = await later
        assert await read_all(database, 0, 3) == [early, early_too, later_id]
        assert await events.ids(3) == [early, early_too, later_id]


async def append_in_own_transaction(
    database: Database, connection: asyncpg.Connection, name: str
) -> str:
    async with connection.transaction():
        await db.set_tenant(connection, TENANT)
        return await append(database, connection, name)


async def test_concurrent_appends_reach_a_reader_with_no_gap_and_in_order(
    pool: asyncpg.Pool,
    database: Database,
) -> None:
    names = [f"doc_{n}" for n in range(40)]

    async def writer(name: str) -> str:
        async with db.transaction(pool, TENANT) as connection:
            return await append(database, connection, name)

    seen: list[tuple[int, str]] = []
    writers = asyncio.gather(*(writer(name) for name in names))
    async with asyncio.timeout(HANG_GUARD_S):
        position = 0
        while len(seen) < len(names):
            records, position = await read_after(database, TENANT, position, "any", "any")
            seen += [(record["position"], record["context_id"]) for record in records]
    appended = await writers
    assert [number for number, _ in seen] == list(range(1, len(names) + 1))
    assert sorted(context_id for _, context_id in seen) == sorted(appended)


async def test_a_transaction_open_in_another_database_holds_no_stream_back(
    http: httpx.AsyncClient, store: PostgresStore, database: Database, database_url: str
) -> None:
    other_name = f"lineage_other_{uuid.uuid4().hex[:12]}"
    base = url_for(database_url, "postgres")
    with janitor(base, other_name):
        other = await asyncpg.connect(url_for(database_url, other_name))
        try:
            async with open_stream(http) as events, other.transaction():
                # A write transaction of another database (a bulk load, say), still open.
                await other.fetchval("SELECT pg_current_xact_id()")
                new = await derive(store, [], "n", "document", "l", "1", source_uri="s3://n")
                records, _ = await read_after(database, TENANT, 0, "any", "any")
                assert [record["context_id"] for record in records] == [new.context_id]
                assert await events.ids(1) == [new.context_id]
        finally:
            await other.close()


async def test_positions_and_audit_ids_are_counted_per_tenant(
    database_url: str,
    database: Database,
    owner_database: Database,
    owner: asyncpg.Connection,
    settings: Settings,
) -> None:
    tokens = {}
    for tenant in ("acme", "rival"):
        await auth.create_tenant(owner_database, tenant)
        tokens[tenant], _ = await auth.create_key(database, tenant, "read")
    keyed = settings.model_copy(update={"auth": "keys"})
    app = create_app(keyed, database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as http:
            for tenant, reads, appends in (("rival", 2, 1), ("acme", 5, 4), ("rival", 1, 2)):
                store = PostgresStore(database, tenant)
                for n in range(appends):
                    await derive(store, [], f"{tenant}{n}", "document", "l", "1",
                                 source_uri=f"s3://{tenant}/{n}")  # fmt: skip
                for _ in range(reads):
                    response = await http.get(
                        "/v1/contexts", headers={"Authorization": f"Bearer {tokens[tenant]}"}
                    )
                    assert response.status_code == 200
    for tenant, reads, appends in (("acme", 5, 4), ("rival", 3, 3)):
        audit_ids = await owner.fetch(
            "SELECT audit_id FROM audit_log WHERE tenant_id = $1 ORDER BY audit_id", tenant
        )
        positions = await owner.fetch(
            "SELECT position FROM events WHERE tenant_id = $1 ORDER BY position", tenant
        )
        assert [row["audit_id"] for row in audit_ids] == list(range(1, reads + 1))
        assert [row["position"] for row in positions] == list(range(1, appends + 1))


async def test_each_tenant_streams_only_its_own_records(
    database_url: str, database: Database, owner_database: Database, settings: Settings
) -> None:
    tokens = {}
    for tenant in ("acme", "rival"):
        await auth.create_tenant(owner_database, tenant)
        tokens[tenant], _ = await auth.create_key(database, tenant, "read")
    keyed = settings.model_copy(update={"auth": "keys"})
    with live_server.serve(create_app(keyed, database_url=database_url)) as url:
        async with (
            httpx.AsyncClient(base_url=url, timeout=HANG_GUARD_S) as http,
            open_stream(http, {"Authorization": f"Bearer {tokens['acme']}"}) as acme,
            open_stream(http, {"Authorization": f"Bearer {tokens['rival']}"}) as rival,
        ):
            rivals = await derive(PostgresStore(database, "rival"), [], "r", "document", "l", "1",
                                  source_uri="s3://r")  # fmt: skip
            acmes = await derive(PostgresStore(database, "acme"), [], "a", "document", "l", "1",
                                 source_uri="s3://a")  # fmt: skip
            assert await acme.ids(1) == [acmes.context_id]
            assert await rival.ids(1) == [rivals.context_id]


async def test_filters_by_trace_and_by_session(
    http: httpx.AsyncClient, store: PostgresStore, database: Database
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
    records, position = await read_after(database, TENANT, 0, "none" * 8, "any")
    assert records == [] and position == 3


async def test_a_commit_notifies_the_listening_streams_of_its_tenant_only(
    database_url: str, store: PostgresStore
) -> None:
    listener = EventListener(database_url)
    await listener.listen()
    ours_tag = await events.tenant_stream_tag(store.database, TENANT)
    theirs_tag = await events.tenant_stream_tag(store.database, "rival")
    try:
        async with listener.subscribe(ours_tag) as ours, listener.subscribe(theirs_tag) as theirs:
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


async def test_a_stream_whose_client_left_ends_its_subscription(
    database_url: str, settings: Settings
) -> None:
    """The notifications' subscription ends with the stream when the caller goes, without the
    cycle collector's help."""
    owner = await asyncpg.connect(database_url)
    key = await db.fetch_vouching_key(owner)
    await owner.close()
    tag = events.stream_tag(TENANT, None if key is None else db.tenant_token(key, TENANT))
    app = create_app(settings, database_url=database_url)
    with live_server.serve(app) as url:
        listener: EventListener = app.state.events
        async with httpx.AsyncClient(base_url=url, timeout=HANG_GUARD_S) as http:
            async with open_stream(http) as reader:
                async with asyncio.timeout(HANG_GUARD_S):
                    assert (await anext(reader.lines)).startswith(": stream open")
                assert listener.subscriptions(tag) == 1
            gc.disable()  # a subscription only the cycle collector would end stays open
            try:
                for _ in range(int(HANG_GUARD_S / 0.05)):
                    if listener.subscriptions(tag) == 0:
                        break
                    await asyncio.sleep(0.05)
                assert listener.subscriptions(tag) == 0
            finally:
                gc.enable()
