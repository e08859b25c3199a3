"""What a request must be before it may cost the service anything: a body read whole, within a
deadline and a size cap (chunked uploads included), before it counts against the requests in
flight; and a bad-request cap keyed by the key the caller really holds, in bounded memory.

The socket attacks run against a real server process on loopback (bench/server.py), with small
limits so that their loops stay short; each loop is bounded in count and time."""

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from fastapi import FastAPI

from bench.server import Server, serving
from lineage.api.app import create_app
from lineage.api.limits import BadRequestCap, CapBadRequests
from lineage.services import auth
from lineage.settings import Settings
from tests.conftest import database_at

MAX_BODY = 64 * 1024
READ_TIMEOUT_S = 2
SOCKET_TIMEOUT_S = 30.0  # a guard against a hang, not a timing assertion
IDLE_SOCKETS = 8
CHUNKED_LIMIT = 16 * 1024 * 1024  # the most the chunked upload sends before giving up


def document(context_id: str) -> dict[str, str]:
    return {"context_id": context_id, "kind": "document", "source_uri": f"s3://{context_id}.md"}


async def make_key(database_url: str, scope: str = "ingest") -> str:
    async with database_at(database_url) as database:
        token, _ = await auth.create_key(database, "default", scope)
    return token


@pytest.fixture
def keyed_server(database_url: str) -> Iterator[tuple[Server, str]]:
    token = asyncio.run(make_key(database_url))
    env = {
        "LINEAGE_AUTH": "keys",
        "LINEAGE_MAX_CONCURRENT_REQUESTS": "2",
        "LINEAGE_MAX_BODY_BYTES": str(MAX_BODY),
        "LINEAGE_BODY_READ_TIMEOUT_S": str(READ_TIMEOUT_S),
        "LINEAGE_LOG_INTERVAL_S": "0",
    }
    with serving(database_url, env, api_key=token) as server:
        yield server, token


def half_sent(port: int, headers: str = "") -> socket.socket:
    """A POST whose headers promise 1000 bytes of body, of which one is sent."""
    connection = socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S)
    head = (
        "POST /v1/contexts HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        f"content-length: 1000\r\n{headers}\r\n"
    )
    connection.sendall(head.encode() + b"{")
    return connection


def status_of(connection: socket.socket) -> int:
    head = b""
    while b"\r\n" not in head:
        chunk = connection.recv(4096)
        if not chunk:
            raise AssertionError(f"closed without an answer after {head!r}")
        head += chunk
    return int(head.split(b" ", 2)[1])


@pytest.mark.slow
def test_idle_uploads_hold_no_slot_and_time_out_with_408(keyed_server: tuple[Server, str]) -> None:
    server, token = keyed_server
    idle = [half_sent(server.port) for _ in range(IDLE_SOCKETS // 2)]
    idle += [half_sent(server.port, f"authorization: Bearer {token}\r\n") for _ in idle[:]]
    try:
        time.sleep(0.5)  # let the server take them all in
        created = httpx.post(
            f"{server.base_url}/v1/contexts",
            json={**document("doc_past_idle"), "text": "t"},
            headers=server.headers,
            timeout=SOCKET_TIMEOUT_S,
        )
        assert created.status_code == 201, created.text  # not 429: the idle ones hold nothing
        assert [status_of(connection) for connection in idle] == [408] * len(idle)
    finally:
        for connection in idle:
            connection.close()


@pytest.mark.slow
def test_a_chunked_upload_is_cut_off_at_the_body_limit(keyed_server: tuple[Server, str]) -> None:
    server, _ = keyed_server
    connection = socket.create_connection(("127.0.0.1", server.port), timeout=SOCKET_TIMEOUT_S)
    head = (
        "POST /v1/session HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        "transfer-encoding: chunked\r\n\r\n"
    )
    chunk = b"a" * 16384
    framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    sent = 0
    try:
        connection.sendall(head.encode())
        while sent < CHUNKED_LIMIT:
            connection.sendall(framed)
            sent += len(chunk)
    except OSError:
        pass  # the server answered and closed while we were still sending: what we want
    assert sent < CHUNKED_LIMIT, "the server read the whole unbounded upload"
    assert status_of(connection) == 413
    connection.close()
    # A chunked body under the limit is read and served as usual.
    with httpx.Client(base_url=server.base_url, headers=server.headers) as http:
        body = (
            b'{"context_id": "doc_chunked", "kind": "document", "source_uri": "s3://c",',
            b' "text": "t"}',
        )
        created = http.post(
            "/v1/contexts", content=iter(body), headers={"content-type": "application/json"}
        )
        assert created.status_code == 201, created.text


@pytest.fixture
async def keyed_app(database_url: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(
        Settings(auth="keys", bad_request_limit=3, bad_request_window_s=60),
        database_url=database_url,
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as http:
            yield app, http


def bad_request_cap(app: FastAPI) -> BadRequestCap:
    layer = app.middleware_stack
    while not isinstance(layer, CapBadRequests):
        layer = layer.app  # type: ignore[union-attr]
    return layer.cap


async def test_bad_requests_with_a_victims_key_id_do_not_lock_the_victim_out(
    keyed_app: tuple[FastAPI, httpx.AsyncClient], database_url: str
) -> None:
    app, http = keyed_app
    victim = await auth.create_key(app.state.db, "default", "ingest")
    token = victim[0]
    key_id = victim[1]["key_id"]
    forged = {"Authorization": f"Bearer lk_{key_id}_{'x' * 43}"}
    statuses = [(await http.get("/v1/contexts/x", headers=forged)).status_code for _ in range(4)]
    assert statuses == [401, 401, 401, 429]  # the forger's own address is capped
    real = {"Authorization": f"Bearer {token}"}
    created = await http.post("/v1/contexts", json={**document("doc_v"), "text": "t"}, headers=real)
    assert created.status_code == 201, created.text


async def test_session_users_behind_one_address_have_their_own_caps(
    keyed_app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, http = keyed_app
    cookies = []
    for _ in range(2):
        token, _ = await auth.create_key(app.state.db, "default", "read")
        opened = await http.post("/v1/session", json={"key": token})
        assert opened.status_code == 200, opened.text
        cookies.append(opened.cookies["lineage_session"])
        http.cookies.clear()
    noisy, quiet = ({"cookie": f"lineage_session={cookie}"} for cookie in cookies)
    for _ in range(3):
        assert (await http.get("/v1/impact?kind=nope", headers=noisy)).status_code == 422
    assert (await http.get("/v1/impact?kind=nope", headers=noisy)).status_code == 429
    assert (await http.get("/v1/contexts/absent", headers=quiet)).status_code == 404


async def test_made_up_key_ids_cost_no_memory_and_the_table_is_bounded(
    keyed_app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, http = keyed_app
    for index in range(50):
        made_up = {"Authorization": f"Bearer lk_{index:016x}_{'y' * 43}"}
        await http.get("/v1/contexts/x", headers=made_up)
    assert bad_request_cap(app).tracked() == 1  # all of them one address
    cap = BadRequestCap(limit=3, window_s=60, max_tracked=100)
    for _ in range(3):
        cap.note("addr:192.0.2.1", 422)
    assert cap.retry_after("addr:192.0.2.1") is not None
    for index in range(1000):
        cap.note(f"addr:10.0.{index // 256}.{index % 256}", 422)
    assert cap.tracked() == 100
    assert cap.retry_after("addr:192.0.2.1") is None  # the least recently seen went first


async def test_a_capped_address_still_reaches_health_metrics_and_login(
    keyed_app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, http = keyed_app
    nonsense = {"Authorization": "Bearer nonsense"}
    statuses = [(await http.get("/v1/contexts/x", headers=nonsense)).status_code for _ in range(4)]
    assert statuses == [401, 401, 401, 429]  # the cap still holds for the routes it protects
    for method, path in (
        ("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics"), ("GET", "/ui"),
        ("GET", "/ui/app.js"), ("POST", "/v1/session"), ("DELETE", "/v1/session"),
    ):  # fmt: skip
        answer = await http.request(method, path, headers=nonsense, json={"key": "nonsense"})
        assert answer.status_code != 429, (method, path, answer.text)
    token, _ = await auth.create_key(app.state.db, "default", "read")
    opened = await http.post("/v1/session", json={"key": token})
    assert opened.status_code == 200, opened.text
    assert (await http.get("/v1/contexts/x", headers=nonsense)).status_code == 429
