"""A large batch does not hold the event loop: while a real server takes a batch of tens of
thousands of records (seconds of CPU: parsing, checking, hashing, signing, the answer), most of
that CPU is spent off the loop's thread, and /healthz is answered while the batch is still in
progress. Measured as CPU time per thread and as the order answers arrive in, which a loaded
machine does not change the way it changes waiting times."""

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from bench.server import Server, serving
from tests.test_event_loop import thread_cpu_ticks

RECORDS = 20_000


@pytest.fixture
def server(database_url: str) -> Iterator[Server]:
    env = {"LINEAGE_AUTH": "none", "LINEAGE_LOG_INTERVAL_S": "0", "LINEAGE_LOG_LEVEL": "error"}
    with serving(database_url, env) as running:
        yield running


def batch(count: int) -> dict[str, list[dict[str, object]]]:
    return {
        "records": [
            {"context_id": f"doc_{i}", "kind": "document", "source_uri": f"s3://docs/{i}.md",
             "text": f"document {i}", "attributes": {"n": i, "tags": ["a", "b"]}}
            for i in range(count)
        ]
    }  # fmt: skip


@pytest.mark.slow
def test_a_large_batch_runs_off_the_loop_and_healthz_answers_meanwhile(server: Server) -> None:
    loop_thread = server.process.pid  # uvicorn runs the event loop on the main thread
    body = batch(RECORDS)
    healthz_before_batch = 0
    with ThreadPoolExecutor(1) as sender, httpx.Client(timeout=600) as probe:
        before = thread_cpu_ticks(server.process.pid)
        sent = sender.submit(
            httpx.post, f"{server.base_url}/v1/contexts/batch", json=body, timeout=600
        )
        while not sent.done():
            assert probe.get(f"{server.base_url}/healthz").status_code == 200
            if not sent.done():
                healthz_before_batch += 1
            time.sleep(0.05)  # a few a second: the probes' own CPU on the loop stays small
        answer = sent.result()
        after = thread_cpu_ticks(server.process.pid)
    assert answer.status_code == 201, answer.text[:300]
    assert len(answer.json()["results"]) == RECORDS
    on_loop = after[loop_thread] - before[loop_thread]
    off_loop = sum(spent - before.get(thread, 0) for thread, spent in after.items()) - on_loop
    assert healthz_before_batch >= 1
    assert on_loop < off_loop, (on_loop, off_loop, healthz_before_batch)
