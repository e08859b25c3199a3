"""What the HTTP path costs beside its SQL: the server process's CPU per walk-back and per
single-record append against the CPU PostgreSQL's backends spent on the same requests.

    python -m bench.http_cost --size 20000 --requests 1000

A fresh DAG of `--size` records, `lineage` served by uvicorn in its own process with bearer
keys on (so every request looks its key up and writes its audit row as users run it), one
keep-alive connection sending requests one after another. CPU is read from /proc/PID/stat
(utime + stime) of the server process and of every backend connected to the bench database,
before and after the timed requests; the ratio is server CPU / database CPU for the same
requests, measured in one run (so load from elsewhere on the machine shifts both alike).
"""

import argparse
import asyncio
import json
import os
import time
from collections.abc import Callable
from typing import Any

import asyncpg

from bench.database import drop, load, recreate
from bench.load import chunk_record, seed_documents
from bench.server import Connection, Server, serving
from lineage.db.database import Database
from lineage.services import auth
from lineage.settings import Settings

TENANT = "default"
ENV = {"LINEAGE_AUTH": "keys", "LINEAGE_LOG_LEVEL": "warning", "LINEAGE_LOG_INTERVAL_S": "0"}
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far; 0 for one that is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * TICK_S  # fields 14 and 15 of proc(5)


async def backends(owner: asyncpg.Connection, dbname: str) -> list[int]:
    pids: list[int] = [
        row["pid"]
        for row in await owner.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            dbname,
        )
    ]
    return pids


async def measured(
    server: Server,
    owner: asyncpg.Connection,
    dbname: str,
    requests: list[Callable[[Connection], Any]],
) -> dict[str, float]:
    """Send the requests in order on one connection; CPU per request (ms) of each side."""
    connection = await Connection.open(server.port)
    try:
        for send in requests[: len(requests) // 10]:  # warm: pools, plans, caches
            await send(connection)
        before = {pid: cpu_seconds(pid) for pid in await backends(owner, dbname)}
        server_before = cpu_seconds(server.process.pid)
        started = time.perf_counter()
        for send in requests:
            await send(connection)
        wall = time.perf_counter() - started
        server_cpu = cpu_seconds(server.process.pid) - server_before
        database_cpu = sum(
            cpu_seconds(pid) - before.get(pid, 0.0) for pid in await backends(owner, dbname)
        )
    finally:
        await connection.close()
    count = len(requests)
    return {
        "requests": count,
        "wall_ms_per_request": wall * 1000 / count,
        "server_cpu_ms_per_request": server_cpu * 1000 / count,
        "database_cpu_ms_per_request": database_cpu * 1000 / count,
        "ratio": server_cpu / database_cpu if database_cpu else float("inf"),
    }


def expect(status: int, body: bytes, wanted: set[int], what: str) -> None:
    if status not in wanted:
        raise RuntimeError(f"{what}: {status} {body[:300]!r}")


async def run(
    server_url: str, size: int, count: int, keys: bool = True
) -> dict[str, dict[str, float]]:
    dbname = f"lineage_bench_http_{size}"
    url = await recreate(server_url, dbname)
    try:
        picks, _ = await load(url, size, TENANT)
        database = await Database.connect(Settings(), url)
        try:
            token, _ = await auth.create_key(database, TENANT, "admin")
        finally:
            await database.close()
        owner = await asyncpg.connect(url)
        try:
            environment = ENV if keys else ENV | {"LINEAGE_AUTH": "none"}
            with serving(url, environment, api_key=token if keys else None) as server:
                answers = picks.answer_ids
                paths = [f"/v1/contexts/{answers[n % len(answers)]}/lineage" for n in range(count)]

                def walk(path: str) -> Callable[[Connection], Any]:
                    async def send(connection: Connection) -> None:
                        status, body = await connection.request("GET", path, None, server.headers)
                        expect(status, body, {200}, f"GET {path}")

                    return send

                parents = await seed_documents(server, "cost")

                def append(number: int) -> Callable[[Connection], Any]:
                    async def send(connection: Connection) -> None:
                        record = chunk_record(parents[number % len(parents)], number)
                        status, body = await connection.request(
                            "POST", "/v1/contexts", record, server.headers
                        )
                        expect(status, body, {200, 201}, "POST /v1/contexts")

                    return send

                return {
                    "walk-back (GET /v1/contexts/{id}/lineage)": await measured(
                        server, owner, dbname, [walk(path) for path in paths]
                    ),
                    "single append (POST /v1/contexts)": await measured(
                        server, owner, dbname, [append(n) for n in range(count)]
                    ),
                }
        finally:
            await owner.close()
    finally:
        await drop(server_url, dbname)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--size", type=int, default=20_000, help="records in the DAG")
    parser.add_argument("--requests", type=int, default=1000, help="timed requests of each kind")
    parser.add_argument(
        "--no-keys", action="store_true", help="LINEAGE_AUTH=none: no key lookup per request"
    )
    arguments = parser.parse_args()
    figures = asyncio.run(
        run(arguments.server_url, arguments.size, arguments.requests, not arguments.no_keys)
    )
    print(json.dumps(figures, indent=2))
