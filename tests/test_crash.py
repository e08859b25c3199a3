"""Crash safety: concurrent clients ingest through a real API server while its PostgreSQL (a
private one, tests/private_postgres.py) is SIGKILLed, then stopped without a checkpoint, and
restarted each time. Every record acknowledged with 2xx is there afterwards, once, with its
parents; during the outages the API answers 503 with a problem body and Retry-After, never 500.
"""

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from lineage.core.derive import Context, derive
from lineage.core.hashing import content_hash
from lineage.db.migrate import migrate
from lineage.store import HttpStore
from lineage.store.spool import SpoolingStore
from tests.private_postgres import PrivatePostgres, free_port, private_postgres

# Starts servers or browsers of its own: outside the fast tier.
pytestmark = pytest.mark.slow

CLIENTS = 4
REQUESTS_PER_CLIENT = 100
BATCH_EVERY = 4  # every 4th request appends a batch of 3 instead of one record
ACKS_BETWEEN_CRASHES = 80


@pytest.fixture(scope="module")
def private() -> Iterator[PrivatePostgres]:
    with private_postgres() as server:
        migrate(server.url)
        yield server


@dataclass(frozen=True)
class Api:
    url: str
    log: Path

    def log_tail(self) -> str:
        return self.log.read_text()[-6000:]


@pytest.fixture(scope="module")
def api(private: PrivatePostgres, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """`uvicorn` in its own process, serving the app on the private database."""
    data_dir = tmp_path_factory.mktemp("api")
    port = free_port()
    env = {
        **os.environ,
        "LINEAGE_DATABASE_URL": private.url,
        "LINEAGE_DATA_DIR": str(data_dir),
        "LINEAGE_AUTH": "none",
    }
    command = [sys.executable, "-m", "uvicorn", "--factory", "lineage.api.app:create_app"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    with (data_dir / "server.log").open("wb") as output:
        server = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    started = Api(f"http://127.0.0.1:{port}", data_dir / "server.log")
    try:
        _wait_until_serving(started, server)
        yield started
    finally:
        server.terminate()
        server.wait(timeout=30)


def _wait_until_serving(api: Api, server: subprocess.Popen[bytes]) -> None:
    for _ in range(600):
        assert server.poll() is None, f"the API server exited:\n{api.log_tail()}"
        try:
            if httpx.get(f"{api.url}/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"the API server did not start:\n{api.log_tail()}")


@dataclass
class Ingest:
    """What the clients saw: acknowledged records with their parents, and every failure."""

    acknowledged: dict[str, list[str]] = field(default_factory=dict)
    unavailable: list[httpx.Response] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)


def record(context_id: str, parent_id: str | None) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "context_id": context_id,
        "content_hash": content_hash(context_id),
        "trace_id": "c" * 32,
    }
    if parent_id is None:
        return {**fields, "kind": "document", "source_uri": f"s3://crash/{context_id}"}
    return {**fields, "kind": "chunk", "parent_ids": [parent_id], "transform": "chunker"}


async def client(http: httpx.AsyncClient, number: int, seen: Ingest) -> None:
    """A chain: each request's first record derives from the last acknowledged one. A 503 is
    retried with the same ids, as any client should."""
    parent: str | None = None
    for step in range(REQUESTS_PER_CLIENT):
        size = 3 if step % BATCH_EVERY == 0 else 1
        ids = [f"crash_{number}_{step}_{k}" for k in range(size)]
        records = [record(i, p) for i, p in zip(ids, [parent, *ids[:-1]], strict=True)]
        path, body = (
            ("/v1/contexts/batch", {"records": records})
            if size > 1
            else (
                "/v1/contexts",
                records[0],
            )
        )
        while True:
            response = await http.post(path, json=body)
            if response.status_code != 503:
                break
            seen.unavailable.append(response)
            await asyncio.sleep(0.02)
        if response.status_code not in {200, 201}:
            seen.unexpected.append(f"{path} -> {response.status_code} {response.text}")
            return
        for stored in records:
            seen.acknowledged[stored["context_id"]] = stored.get("parent_ids", [])
        parent = ids[-1]


async def crash_and_restart(
    private: PrivatePostgres, seen: Ingest, crashes: list[Callable[[], None]]
) -> list[int]:
    """Crash mid-ingest, wait until a client has met the outage, restart; return how many
    requests met each outage."""
    met = []
    for crash in crashes:
        await until(seen, acknowledged, acknowledged(seen) + ACKS_BETWEEN_CRASHES)
        before = unavailable(seen)
        await asyncio.to_thread(crash)
        await until(seen, unavailable, before + 1)
        await asyncio.to_thread(private.start)
        met.append(unavailable(seen) - before)
    return met


def acknowledged(seen: Ingest) -> int:
    return len(seen.acknowledged)


def unavailable(seen: Ingest) -> int:
    return len(seen.unavailable)


async def until(seen: Ingest, count: Callable[[Ingest], int], reaches: int) -> None:
    """Poll (the clients only append) for at most 30 s; the asserts judge what happened."""
    for _ in range(3000):
        if count(seen) >= reaches or seen.unexpected:
            return
        await asyncio.sleep(0.01)


async def sdk_pipeline(store: SpoolingStore, made: list[Context]) -> None:
    """A pipeline recording through the SDK at the same time: it never sees the outages."""
    parent: list[Context] = []
    for step in range(REQUESTS_PER_CLIENT):
        kind, source = ("document", f"s3://sdk/{step}") if not parent else ("chunk", None)
        made.append(await derive(store, parent, f"sdk {step}", kind, source_uri=source))
        parent = [made[-1]]
        await asyncio.sleep(0.01)


async def test_acknowledged_records_survive_postgres_crashes(
    private: PrivatePostgres, api: Api, tmp_path: Path
) -> None:
    seen = Ingest()
    sdk_made: list[Context] = []
    sdk_http = HttpStore(api.url)
    sdk = SpoolingStore(sdk_http, tmp_path, retry_min_s=0.02, retry_max_s=0.2)
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
            crashes = asyncio.create_task(
                crash_and_restart(private, seen, [private.kill, lambda: private.stop("immediate")])
            )
            await asyncio.gather(
                *(client(http, number, seen) for number in range(CLIENTS)),
                sdk_pipeline(sdk, sdk_made),
                crashes,
            )
        sdk_replay = await sdk.replay()
    finally:
        await sdk.aclose()
        await sdk_http.aclose()

    assert not seen.unexpected, f"{seen.unexpected[:3]}\nserver log:\n{api.log_tail()}"
    assert sdk_replay.remaining == sdk_replay.rejected == 0
    assert any(context.spooled for context in sdk_made)
    met = crashes.result()
    assert len(met) == 2 and all(met), f"requests that met each outage: {met}"
    for response in seen.unavailable:
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["title"] == "StoreUnavailable"
        assert int(response.headers["retry-after"]) >= 1
    connection = await asyncpg.connect(private.url)
    try:
        rows = await connection.fetch(
            "SELECT context_id, parent_ids, count(*) OVER (PARTITION BY context_id) AS copies "
            "FROM provenance WHERE context_id LIKE 'crash\\_%'"
        )
        sdk_rows = await connection.fetch(
            "SELECT context_id, parent_ids FROM provenance WHERE context_id = ANY($1)",
            [context.context_id for context in sdk_made],
        )
    finally:
        await connection.close()
    assert all(row["copies"] == 1 for row in rows)
    assert {row["context_id"]: list(row["parent_ids"]) for row in rows} == seen.acknowledged
    batches = REQUESTS_PER_CLIENT // BATCH_EVERY
    assert len(seen.acknowledged) == CLIENTS * (REQUESTS_PER_CLIENT + 2 * batches)
    assert {row["context_id"]: list(row["parent_ids"]) for row in sdk_rows} == {
        context.context_id: context.parent_ids for context in sdk_made
    }
