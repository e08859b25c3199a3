"""`lineage serve` outlives a database that is down when it starts: it serves at once, answers
/readyz (and every data route) 503 while it retries, and migrates and connects as soon as
PostgreSQL is up, so a restart of the database never needs a supervisor to restart it."""

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.private_postgres import PrivatePostgres, free_port

# Starts servers or browsers of its own: outside the fast tier.
pytestmark = pytest.mark.slow

# Bounds on the polling loops; a correct service is ready long before.
WAIT_LIMIT_S = 60.0


@pytest.fixture
def stopped_postgres() -> Iterator[PrivatePostgres]:
    """A private PostgreSQL made but not started."""
    server = PrivatePostgres()
    try:
        yield server
    finally:
        server.destroy()


def wait_for(url: str, status: int, server: subprocess.Popen[bytes], log: Path) -> httpx.Response:
    deadline = time.monotonic() + WAIT_LIMIT_S
    while time.monotonic() < deadline:
        assert server.poll() is None, f"lineage serve exited:\n{log.read_text()[-4000:]}"
        try:
            answer = httpx.get(url, timeout=5)
            if answer.status_code == status:
                return answer
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} never answered {status}:\n{log.read_text()[-4000:]}")


@pytest.mark.slow
def test_serve_waits_for_a_database_that_is_down_at_start(
    stopped_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    port = free_port()
    env = os.environ | {
        "LINEAGE_DATABASE_URL": stopped_postgres.url,
        "LINEAGE_DATA_DIR": str(tmp_path),
        "LINEAGE_AUTH": "none",
        "LINEAGE_LOG_INTERVAL_S": "0",
    }
    command = [sys.executable, "-m", "lineage", "serve", "--host", "127.0.0.1", "--port", str(port)]
    log = tmp_path / "serve.log"
    base = f"http://127.0.0.1:{port}"
    with log.open("wb") as output:
        server = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    try:
        wait_for(f"{base}/healthz", 200, server, log)
        not_ready = httpx.get(f"{base}/readyz", timeout=5)
        assert not_ready.status_code == 503
        assert not_ready.headers["retry-after"]
        assert "not ready" in not_ready.json()["detail"]
        assert httpx.get(f"{base}/v1/contexts/doc_1", timeout=5).status_code == 503

        stopped_postgres.start()
        wait_for(f"{base}/readyz", 200, server, log)
        body = {"context_id": "doc_1", "kind": "document", "source_uri": "s3://1.md", "text": "t"}
        created = httpx.post(f"{base}/v1/contexts", json=body, timeout=10)
        assert created.status_code == 201, created.text  # migrated, then connected
        assert "retrying" in log.read_text()
    finally:
        server.terminate()
        server.wait(timeout=30)
