"""Fairness between tenants: another tenant's walk-back p95, idle and while one tenant runs
four export loops at once, with the fair shares off and at their defaults.

    python -m bench.fairness --size 20000 --walks 200 [--citus]

Tenant `default` holds a DAG of `--size` records and walks back its answers, one request after
another on one keep-alive connection. Tenant `exporter` holds an answer over 300 summaries of
10 chunks each (a PROV export of 3,302 records: a second or more of CPU) and runs four loops,
each exporting it again as soon as it has its answer, and after a 429 waiting out Retry-After
as a client should. `lineage` runs in its own uvicorn process with keys on, twice: with
LINEAGE_MAX_HEAVY_PER_KEY/_PER_TENANT at 0 (no fair shares, as before them) and at their
defaults. The ratio is the busy p95 over the idle p95 of the same run. With --citus, the
database is on a private Citus cluster (a coordinator and two workers, tests/citus_cluster.py),
placed by `lineage distribute`.
"""

import argparse
import asyncio
import json
import time
from collections import Counter
from typing import Any

from bench.database import drop, load, recreate
from bench.figures import percentile
from bench.server import Connection, Server, serving
from lineage.core.hashing import content_hash
from lineage.core.record import NewContext
from lineage.db.database import Database
from lineage.db.distribute import distribute
from lineage.db.migrate import migrate
from lineage.services import auth
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.citus_cluster import citus_cluster

WALKER = "default"
EXPORTER = "exporter"
EXPORTS = 4
SUMMARIES = 300
CHUNKS_PER_SUMMARY = 10
WIDE_ANSWER = "wide_answer"
ENV = {"LINEAGE_AUTH": "keys", "LINEAGE_LOG_LEVEL": "warning", "LINEAGE_LOG_INTERVAL_S": "0"}
NO_SHARES = {"LINEAGE_MAX_HEAVY_PER_KEY": "0", "LINEAGE_MAX_HEAVY_PER_TENANT": "0"}


async def load_wide_answer(database: Database) -> None:
    """The exporter's answer over 3,000 chunks of one document."""
    store = PostgresStore(database, EXPORTER)
    await store.append(
        [NewContext(context_id="wide_doc", kind="document", source_uri="s3://wide.md",
                    content_hash=content_hash("wide"))]
    )  # fmt: skip
    chunks = [
        NewContext(context_id=f"chunk_{i}", kind="chunk", parent_ids=["wide_doc"],
                   content_hash=content_hash(f"chunk {i}"), transform="chunker",
                   transform_version="chunker@1.0")
        for i in range(SUMMARIES * CHUNKS_PER_SUMMARY)
    ]  # fmt: skip
    for start in range(0, len(chunks), 1000):
        await store.append(chunks[start : start + 1000])
    await store.append(
        [
            NewContext(context_id=f"summary_{s}", kind="summary",
                       content_hash=content_hash(f"summary {s}"),
                       parent_ids=[f"chunk_{s * CHUNKS_PER_SUMMARY + c}"
                                   for c in range(CHUNKS_PER_SUMMARY)])
            for s in range(SUMMARIES)
        ]
    )  # fmt: skip
    await store.append(
        [NewContext(context_id=WIDE_ANSWER, kind="answer", content_hash=content_hash("answer"),
                    parent_ids=[f"summary_{s}" for s in range(SUMMARIES)])]
    )  # fmt: skip


async def walk_backs(server: Server, token: str, answers: list[str], count: int) -> list[float]:
    """Milliseconds of each walk-back, sent one after another."""
    headers = {"authorization": f"Bearer {token}"}
    connection = await Connection.open(server.port)
    took: list[float] = []
    try:
        for number in range(count):
            path = f"/v1/contexts/{answers[number % len(answers)]}/lineage"
            started = time.perf_counter()
            status, body = await connection.request("GET", path, None, headers)
            took.append((time.perf_counter() - started) * 1000)
            if status != 200:
                raise RuntimeError(f"GET {path}: {status} {body[:300]!r}")
    finally:
        await connection.close()
    return took


async def export_loop(server: Server, token: str, statuses: Counter[int]) -> None:
    """Export the wide answer again and again until cancelled."""
    headers = {"authorization": f"Bearer {token}"}
    path = f"/v1/contexts/{WIDE_ANSWER}/prov?max_depth=5"
    connection = await Connection.open(server.port)
    try:
        while True:
            status, answered, body = await connection.exchange("GET", path, None, headers)
            statuses[status] += 1
            if status == 429:
                await asyncio.sleep(int(answered.get("retry-after", "1")))
            elif status != 200:
                raise RuntimeError(f"GET {path}: {status} {body[:300]!r}")
    finally:
        await connection.close()


async def measure(
    url: str, env: dict[str, str], tokens: dict[str, str], answers: list[str], walks: int
) -> dict[str, Any]:
    with serving(url, ENV | env) as server:
        await walk_backs(server, tokens[WALKER], answers, walks // 5)  # warm: pools, plans
        idle = await walk_backs(server, tokens[WALKER], answers, walks)
        statuses: Counter[int] = Counter()
        exporting = [
            asyncio.create_task(export_loop(server, tokens[EXPORTER], statuses))
            for _ in range(EXPORTS)
        ]
        await asyncio.sleep(1)  # the exports under way
        busy = await walk_backs(server, tokens[WALKER], answers, walks)
        for task in exporting:
            task.cancel()
        failed = [
            result
            for result in await asyncio.gather(*exporting, return_exceptions=True)
            if not isinstance(result, asyncio.CancelledError)
        ]
        if failed:
            raise RuntimeError(f"an export loop failed: {failed[0]!r}")
    idle_p95, busy_p95 = percentile(idle, 0.95), percentile(busy, 0.95)
    return {
        "walk_back_p95_idle_ms": round(idle_p95, 1),
        "walk_back_p95_during_exports_ms": round(busy_p95, 1),
        "ratio": round(busy_p95 / idle_p95, 1),
        "exports_answered": statuses[200],
        "exports_refused_429": statuses[429],
    }


async def compare(url: str, size: int, walks: int) -> dict[str, dict[str, Any]]:
    """Load both tenants into the migrated database at `url`, then measure."""
    picks, _ = await load(url, size, WALKER)
    owner = await Database.connect(Settings(), url, as_owner=True)
    try:
        await auth.create_tenant(owner, EXPORTER)
    finally:
        await owner.close()
    database = await Database.connect(Settings(), url)
    try:
        await load_wide_answer(database)
        tokens = {
            tenant: (await auth.create_key(database, tenant, "read"))[0]
            for tenant in (WALKER, EXPORTER)
        }
    finally:
        await database.close()
    answers = picks.answer_ids[:50]
    return {
        "fair shares off": await measure(url, NO_SHARES, tokens, answers, walks),
        "fair shares at their defaults": await measure(url, {}, tokens, answers, walks),
    }


async def run(server_url: str, size: int, walks: int) -> dict[str, dict[str, Any]]:
    dbname = f"lineage_bench_fairness_{size}"
    url = await recreate(server_url, dbname)
    try:
        return await compare(url, size, walks)
    finally:
        await drop(server_url, dbname)


async def run_on_citus(size: int, walks: int) -> dict[str, dict[str, Any]]:
    with citus_cluster() as cluster:
        url = cluster.create_database("lineage_bench_fairness")
        migrate(url)
        distribute(url)
        return await compare(url, size, walks)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--size", type=int, default=20_000, help="records of the walking tenant")
    parser.add_argument("--walks", type=int, default=200, help="timed walk-backs, idle and busy")
    parser.add_argument("--citus", action="store_true", help="on a private Citus cluster")
    arguments = parser.parse_args()
    if arguments.citus:
        figures = asyncio.run(run_on_citus(arguments.size, arguments.walks))
    else:
        figures = asyncio.run(run(arguments.server_url, arguments.size, arguments.walks))
    print(json.dumps(figures, indent=2))
