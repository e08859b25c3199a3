"""`lineage serve` outlives a database that is down when it starts: it serves at once, answers
/readyz (and every data route) 503 while it retries, and migrates and connects as soon as
PostgreSQL is up, so a restart of the database never needs a supervisor to restart it."""

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

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


@contextmanager
def lineage_serve(
    database_url: str, tmp_path: Path, *options: str, **environment: str
) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """`lineage serve` in a process of its own on a free loopback port, logging to
    tmp_path/serve.log, keys off: its base URL, the process and the log."""
    port = free_port()
    env = os.environ | {
        "LINEAGE_DATABASE_URL": database_url,
        "LINEAGE_DATA_DIR": str(tmp_path),
        "LINEAGE_AUTH": "none",
        "LINEAGE_LOG_INTERVAL_S": "0",
        **environment,
    }
    command = [sys.executable, "-m", "lineage", "serve", "--host", "127.0.0.1", "--port", str(port)]
    log = tmp_path / "serve.log"
    with log.open("wb") as output:
        server = subprocess.Popen(
            [*command, *options], env=env, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        yield f"http://127.0.0.1:{port}", server, log
    finally:
        server.terminate()
        server.wait(timeout=30)


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
    with lineage_serve(stopped_postgres.url, tmp_path) as (base, server, log):
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


def appended_by(directory: Path) -> float:
    """Documents appended, as the metrics files in `directory` count them."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    return registry.get_sample_value("lineage_records_appended_total", {"kind": "document"}) or 0


@pytest.mark.slow
def test_two_workers_serve_one_port_and_metrics_sums_them(
    database_url: str, tmp_path: Path
) -> None:
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    with lineage_serve(
        database_url, tmp_path, "--workers", "2", PROMETHEUS_MULTIPROC_DIR=str(metrics_dir)
    ) as (base, server, log):
        wait_for(f"{base}/readyz", 200, server, log)

        def append(number: int) -> int:
            body = {"kind": "document", "source_uri": f"s3://{number}.md", "text": f"t{number}"}
            return httpx.post(f"{base}/v1/contexts", json=body, timeout=30).status_code

        created, per_worker = 0, list[float]()
        with ThreadPoolExecutor(8) as pool:  # a fresh connection a request, 8 at once
            for batch in range(25):
                statuses = list(pool.map(append, range(batch * 16, batch * 16 + 16)))
                created += statuses.count(201)
                assert set(statuses) <= {201, 503}, statuses  # 503: a worker still connecting
                per_worker = []
                for counts in metrics_dir.glob("counter_*.db"):
                    alone = tmp_path / counts.stem
                    alone.mkdir(exist_ok=True)
                    shutil.copy(counts, alone / counts.name)
                    per_worker.append(appended_by(alone))
                if sum(1 for count in per_worker if count) == 2:
                    break
        assert sorted(per_worker)[-2] > 0, per_worker  # both processes appended
        assert sum(per_worker) == created
        for _ in range(4):  # whichever worker answers sums both
            exposed = httpx.get(f"{base}/metrics", timeout=10).text
            families = {family.name: family for family in text_string_to_metric_families(exposed)}
            [sample] = [
                s
                for s in families["lineage_records_appended"].samples
                if s.name.endswith("_total") and s.labels == {"kind": "document"}
            ]
            assert sample.value == created
