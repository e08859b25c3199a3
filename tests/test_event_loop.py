"""No CPU-heavy work on the event loop: while a real server writes the PROV export of a walk of
thousands of ancestors (seconds of CPU), most of that CPU is spent off the loop's thread, and
/healthz keeps answering; so does it while a long answer is split into claims. Measured as CPU
time per thread, which a loaded machine does not change the way it changes waiting times."""

import asyncio
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import asyncpg
import httpx
import pytest

from bench.server import Server, serving
from lineage import derive
from lineage.claims.answers import MAX_CLAIMS, record_prompt
from lineage.core.hashing import content_hash
from lineage.core.record import NewContext
from lineage.interop import prov
from lineage.services import reads
from lineage.services.demo import load_incident
from lineage.store.postgres import PostgresStore
from tests.conftest import database_at

SUMMARIES = 300
CHUNKS_PER_SUMMARY = 10  # 3,000 chunks: a walk-back of 3,302 records to export


async def load_a_wide_walk(database_url: str) -> str:
    """An answer over 300 summaries of 10 chunks each, from one document; the prompt id for
    a new answer."""
    async with database_at(database_url) as database:
        store = PostgresStore(database)
        doc = await derive(store, [], "A wide document.", "document", source_uri="s3://wide.md")
        chunks = [
            NewContext(context_id=f"chunk_{i}", kind="chunk", parent_ids=[doc.context_id],
                       content_hash=content_hash(f"chunk {i}"), transform="chunker",
                       transform_version="chunker@1.0")
            for i in range(SUMMARIES * CHUNKS_PER_SUMMARY)
        ]  # fmt: skip
        for start in range(0, len(chunks), 500):
            await store.append(chunks[start : start + 500])
        summaries = [
            NewContext(
                context_id=f"summary_{s}", kind="summary", content_hash=content_hash(f"s {s}"),
                parent_ids=[f"chunk_{s * CHUNKS_PER_SUMMARY + c}"
                            for c in range(CHUNKS_PER_SUMMARY)],
            )
            for s in range(SUMMARIES)
        ]  # fmt: skip
        await store.append(summaries)
        await store.append(
            [NewContext(context_id="wide_answer", kind="answer", content_hash=content_hash("a"),
                        parent_ids=[f"summary_{s}" for s in range(SUMMARIES)])]
        )  # fmt: skip
        prompt = await record_prompt(store, [doc])
        return prompt.context_id


@pytest.fixture
def loaded_server(database_url: str) -> Iterator[tuple[Server, str]]:
    prompt_id = asyncio.run(load_a_wide_walk(database_url))
    env = {"LINEAGE_AUTH": "none", "LINEAGE_LOG_INTERVAL_S": "0", "LINEAGE_LOG_LEVEL": "error"}
    with serving(database_url, env) as running:
        yield running, prompt_id


def thread_cpu_ticks(pid: int) -> dict[int, int]:
    """CPU time (user + system, in clock ticks) of each thread of a process, by thread id."""
    ticks: dict[int, int] = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as stat:
                # Fields after the command name, which sits in parentheses and may hold spaces.
                fields = stat.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # the thread ended between the listing and the read
            continue
        ticks[int(task)] = int(fields[11]) + int(fields[12])
    return ticks


def worker_processes(pid: int) -> dict[int, int]:
    """The process's children, its worker processes (lineage.core.offload, started on first
    use), each with its CPU time (user + system, in clock ticks)."""
    found = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == pid:
            found[int(entry)] = int(fields[11]) + int(fields[12])
    return found


def polling_healthz(server: Server, work: Callable[[], None]) -> int:
    """Runs `work` in a thread while /healthz is asked, a few times a second, to answer 200
    (its own CPU on the loop stays small); how many times it answered."""
    polls = 0
    with ThreadPoolExecutor(1) as heavy, httpx.Client(timeout=600) as probe:
        working = heavy.submit(work)
        while not working.done():
            assert probe.get(f"{server.base_url}/healthz").status_code == 200
            polls += 1
            time.sleep(0.05)
        working.result()
    return polls


@pytest.mark.slow
def test_a_large_export_runs_off_the_loop_and_healthz_answers_through_a_long_answer(
    loaded_server: tuple[Server, str],
) -> None:
    """Where the CPU goes, not how long anything took (which a loaded machine changes): the
    loop's thread spends less CPU than the worker threads and processes while a large export
    is written, and /healthz answers throughout. With the export on the loop, the loop spent
    it all."""
    server, prompt_id = loaded_server
    long_answer = " ".join(f"Sentence {i} of the answer says little." for i in range(MAX_CLAIMS))
    loop_thread = server.process.pid  # uvicorn runs the event loop on the main thread

    def export() -> None:
        answer = httpx.get(
            f"{server.base_url}/v1/contexts/wide_answer/prov", params={"max_depth": 5},
            timeout=600,
        )  # fmt: skip
        assert answer.status_code == 200, answer.text[:300]
        assert answer.text.count("chunk_") >= SUMMARIES * CHUNKS_PER_SUMMARY

    def answer() -> None:
        made = httpx.post(
            f"{server.base_url}/v1/answers",
            json={"prompt_id": prompt_id, "output": {"text": long_answer}}, timeout=600,
        )  # fmt: skip
        assert made.status_code == 201, made.text[:300]

    before = thread_cpu_ticks(server.process.pid)
    in_workers = sum(worker_processes(server.process.pid).values())
    polls = polling_healthz(server, export)
    after = thread_cpu_ticks(server.process.pid)
    in_workers = sum(worker_processes(server.process.pid).values()) - in_workers
    on_loop = after[loop_thread] - before[loop_thread]
    off_loop = sum(spent - before.get(thread, 0) for thread, spent in after.items()) - on_loop
    off_loop += in_workers
    assert polls >= 1
    assert on_loop < off_loop, (on_loop, off_loop)
    polling_healthz(server, answer)  # the long answer is split while /healthz goes on answering


def written_in_a_worker_process(
    context_id: str, records: bytes, tenant_id: str, output: str
) -> bytes:
    """prov.written_from_json, refusing to run in the service's own process."""
    if multiprocessing.parent_process() is None:
        raise AssertionError("PROV written in the service's own process")
    return prov.written_from_json(context_id, records, tenant_id, output)


def refuse_to_decode(row: asyncpg.Record) -> None:
    raise AssertionError("a record of the export decoded in the service's own process")


async def test_the_prov_export_is_written_in_a_worker_process(
    client: httpx.AsyncClient, store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a thread: writing PROV is pure Python, and a thread holds the GIL through it, so
    every other request's every step waits (bench/RESULTS-fairness.md). The records are
    decoded there too: the service's process only passes the database's JSON on."""
    await load_incident(store)
    monkeypatch.setattr(prov, "written_from_json", written_in_a_worker_process)
    monkeypatch.setattr(reads, "node_from_row", refuse_to_decode)
    monkeypatch.setattr(reads, "nodes_from_rows", refuse_to_decode)
    answer = await client.get("/v1/contexts/answer_1/prov")
    assert answer.status_code == 200, answer.text
    assert "answer_1" in answer.text


async def test_a_long_read_gives_the_loop_turns_while_its_rows_become_nodes(
    pool: asyncpg.Pool,
) -> None:
    """Thousands of rows made into nodes in one go held the loop for tens of milliseconds, and
    another tenant's walk-back waited behind every large export (bench/RESULTS-fairness.md)."""
    async with pool.acquire() as connection:
        rows = await connection.fetch(
            "SELECT g AS context_id, now() AS created_at FROM generate_series(1, 2000) AS g"
        )
    turns = 0

    async def other_request() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(other_request())
    await asyncio.sleep(0)
    before = turns
    nodes = await reads.nodes_from_rows(rows)
    other.cancel()
    assert [node["context_id"] for node in nodes] == list(range(1, 2001))
    assert isinstance(nodes[0]["created_at"], str)
    assert turns - before >= len(rows) // reads.ROWS_PER_TURN - 1


async def test_nodes_are_their_rows_as_node_from_row_makes_each(pool: asyncpg.Pool) -> None:
    """The list looks at its columns' types once: a column null in its first rows (a record not
    expired, a parent not a composite) is still converted where it holds a value."""
    async with pool.acquire() as connection:
        rows = await connection.fetch(
            "SELECT g AS context_id, CASE WHEN g > 1500 THEN now() END AS expired_at, "
            "CASE WHEN g % 2 = 0 THEN ROW(g, 'x') END AS pair, ARRAY[g] AS ids "
            "FROM generate_series(1, 2000) AS g"
        )
    nodes = await reads.nodes_from_rows(rows)
    assert nodes == [reads.node_from_row(row) for row in rows]
    assert nodes[0]["expired_at"] is None and isinstance(nodes[-1]["expired_at"], str)
    assert nodes[0]["pair"] is None and nodes[1]["pair"] == [2, "x"]
    assert nodes[1]["ids"] == [2]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
def test_worker_processes_end_when_the_server_is_killed(database_url: str) -> None:
    """A server killed with SIGKILL (an OOM kill, a kill -9) left its worker processes running,
    each with its memory and its share of CPU, until someone found them."""
    asyncio.run(load_a_wide_walk(database_url))
    env = {"LINEAGE_AUTH": "none", "LINEAGE_LOG_INTERVAL_S": "0", "LINEAGE_LOG_LEVEL": "error"}
    with serving(database_url, env) as server:
        exported = httpx.get(f"{server.base_url}/v1/contexts/wide_answer/prov", timeout=600)
        assert exported.status_code == 200, exported.text[:300]
        workers = worker_processes(server.process.pid)
        assert workers, "the export started no worker process"
        server.process.kill()
        server.process.wait()
        deadline = time.monotonic() + 30  # the end is told at once; the wait is a loaded machine's
        while any(alive(worker) for worker in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(worker) for worker in workers), workers
