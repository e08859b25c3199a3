"""Sockets that never finish their headers are closed, and no one address holds more than its
share of the process's connections: against a real `lineage serve`, over real sockets.

Each address on 127.0.0.0/8 is loopback on Linux, so 127.0.0.2 stands for a second client."""

import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.browser import lineage_serve

HEADER_TIMEOUT_S = 2
PER_ADDRESS = 8
# A guard against a hang, not the timing asserted: the server must close well within it.
GRACE_S = 4.0
OTHER_ADDRESS = "127.0.0.2"


@pytest.fixture
def served(database_url: str, tmp_path: Path) -> Iterator[tuple[str, int]]:
    settings = {
        "LINEAGE_HEADER_READ_TIMEOUT_S": str(HEADER_TIMEOUT_S),
        "LINEAGE_MAX_CONNECTIONS_PER_ADDRESS": str(PER_ADDRESS),
        "LINEAGE_LOG_INTERVAL_S": "0",
    }
    with lineage_serve(database_url, tmp_path, settings=settings) as explorer:
        base = explorer.removesuffix("/ui")
        yield base, int(base.rsplit(":", 1)[1])


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    connection = socket.socket()
    connection.bind((source, 0))
    connection.connect(("127.0.0.1", port))
    return connection


def closed_by(connection: socket.socket, deadline: float) -> float | None:
    """When the server closed it (whatever it sent first), or None if it is still open at
    `deadline` (time.monotonic)."""
    while (left := deadline - time.monotonic()) > 0:
        connection.settimeout(left)
        try:
            if not connection.recv(4096):
                return time.monotonic()
        except TimeoutError:
            return None
        except ConnectionResetError:
            return time.monotonic()
    return None


@pytest.mark.slow
def test_sockets_that_do_not_finish_their_headers_are_closed(served: tuple[str, int]) -> None:
    base, port = served
    silent = connect(port)
    half = connect(port)
    half.sendall(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n")
    # One that was served, then starts another request and stops midway.
    again = connect(port)
    again.sendall(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
    again.settimeout(GRACE_S)
    assert again.recv(4096).startswith(b"HTTP/1.1 200")
    again.sendall(b"GET /healthz HTTP/1.1\r\n")
    started = time.monotonic()
    try:
        closed_at = {
            name: closed_by(connection, started + HEADER_TIMEOUT_S + GRACE_S)
            for name, connection in (("silent", silent), ("half", half), ("again", again))
        }
        waited = {name: at and round(at - started, 2) for name, at in closed_at.items()}
        assert all(at is not None for at in waited.values()), waited
        # Closed by the deadline, not at once: each had nearly HEADER_TIMEOUT_S since started.
        assert min(at or 0 for at in waited.values()) > HEADER_TIMEOUT_S / 2, waited
        # A request that finishes its headers in time is served as before.
        assert httpx.get(f"{base}/healthz", timeout=GRACE_S).status_code == 200
    finally:
        for connection in (silent, half, again):
            connection.close()


@pytest.mark.slow
def test_one_address_holds_at_most_its_share_and_others_are_served(
    served: tuple[str, int],
) -> None:
    base, port = served
    held = [connect(port, OTHER_ADDRESS) for _ in range(PER_ADDRESS * 4)]
    try:
        time.sleep(0.3)  # the server has taken them all in, well within the header timeout
        readable, _, _ = select.select(held, [], [], 0)
        refused = [c for c in readable if closed_by(c, time.monotonic() + 0.01) is not None]
        assert len(held) - len(refused) <= PER_ADDRESS, (len(held), len(refused))
        # Another address is served while that one holds every connection it may.
        health = httpx.get(f"{base}/healthz", timeout=GRACE_S)
        assert health.status_code == 200, health.text
    finally:
        for connection in held:
            connection.close()


@pytest.mark.unit
def test_the_app_holds_its_connections_to_its_own_settings() -> None:
    """However it is served (uvicorn --factory, gunicorn, lineage serve), the app's settings
    are the guard's limits in its process."""
    from lineage.api.app import create_app
    from lineage.api.connections import LIMITS, guard_connections
    from lineage.settings import Settings

    try:
        create_app(Settings(header_read_timeout_s=3.5, max_connections_per_address=5))
        assert (LIMITS.header_timeout_s, LIMITS.max_per_address) == (3.5, 5)
    finally:
        guard_connections(Settings())
