"""Every answer of the hottest document as full records, next to its ids, in one run: the SQL
to the last row (a cursor, as the service reads), the service's NDJSON lines in process, and
HTTP NDJSON and the ids as CSV to the last line, with the server process's CPU; optionally an
earlier checkout's SQL and HTTP server beside this one's. The variants take turns each round,
so drift on the shared machine falls on all of them.

    python -m bench.hottest --records 500000                        # loads the DAG anew
    python -m bench.hottest --records 500000 --reuse --before DIR   # DIR: git archive main | tar -x
    python -m bench.hottest --reuse --explain                        # and the records' plan

Ours runs as the application role in a tenant transaction (row security on, JIT off); figures
are medians of --repeats rounds after one untimed warm-up round.
"""

import argparse
import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg

from bench.database import load, recreate, saved_picks, url_for
from bench.figures import Figure, Report, ratio
from bench.run import HTTP_ENV, TENANT, _to_last_line, machine
from bench.server import Server, serving
from lineage import db
from lineage.db import named_sql
from lineage.db.database import Database
from lineage.services import reads
from lineage.settings import Settings

Timed = Callable[[], Awaitable[int | None]]


async def _cursor(pool: asyncpg.Pool, sql: str, arguments: list[Any]) -> int:
    """Every row of one statement through a cursor, in a tenant transaction as the service."""
    rows = 0
    async with db.transaction(pool, TENANT) as connection:
        await connection.execute("SET LOCAL jit = off")
        async for _ in connection.cursor(sql, *arguments, prefetch=1000):
            rows += 1
    return rows


async def _service(database: Database, settings: Settings, values: dict[str, Any]) -> int:
    """The records as the NDJSON stream has them: reads.record_json, a line each."""
    rows = 0
    async for _ in reads.record_json(database, settings, "blast_radius_by_source", **values):
        rows += 1
    return rows


async def _http(server: Server, source_uri: str, ids: bool) -> int | None:
    await _to_last_line(server, source_uri, ids=ids)
    return None  # the lines are not counted on the way


def _cpu_ms(server: Server) -> float:
    """The server process's CPU time so far (user and system), in milliseconds."""
    fields = Path(f"/proc/{server.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def _explain(pool: asyncpg.Pool, sql: str, arguments: list[Any]) -> str:
    async with db.transaction(pool, TENANT) as connection:
        await connection.execute("SET LOCAL jit = off")
        rows = await connection.fetch("EXPLAIN (ANALYZE, BUFFERS) " + sql, *arguments)
    return "\n".join(row[0] for row in rows)


async def main(arguments: argparse.Namespace) -> Report:
    dbname = f"lineage_bench_hottest_{arguments.records}"
    url = url_for(arguments.server_url, dbname)
    picks = await saved_picks(url) if arguments.reuse else None
    if picks is None:
        url = await recreate(arguments.server_url, dbname)
        picks, _ = await load(url, arguments.records, TENANT)
    hot = picks.hottest_source_uri
    values = {"tenant_id": TENANT, "source_uri": hot, "kind": "answer", "max_depth": 20}
    settings = Settings(auth="none")
    pool = await db.create_pool(url, min_size=1, max_size=2)
    database = Database(pool, settings)
    ours = {name: named_sql.QUERIES[name] for name in ("blast_radius_ids_by_source",
                                                     "blast_radius_by_source")}  # fmt: skip
    variants: dict[str, Timed] = {
        "SQL ids (blast_radius_ids_by_source, cursor)": lambda: _cursor(
            pool, ours["blast_radius_ids_by_source"].sql,
            ours["blast_radius_ids_by_source"].arguments(values)),
        "SQL records (blast_radius_by_source, cursor)": lambda: _cursor(
            pool, ours["blast_radius_by_source"].sql,
            ours["blast_radius_by_source"].arguments(values)),
        "service NDJSON lines (reads.record_json)": lambda: _service(
            database, settings, values),
    }  # fmt: skip
    if arguments.before:
        earlier = named_sql.load(Path(arguments.before) / "lineage" / "sql")
        before = earlier["blast_radius_by_source"]
        variants["SQL records, before (blast_radius_by_source, cursor)"] = lambda: _cursor(
            pool, before.sql, before.arguments(values)
        )
    environments = {"HTTP NDJSON": HTTP_ENV}
    if arguments.before:
        environments["HTTP NDJSON, before"] = {**HTTP_ENV, "PYTHONPATH": arguments.before}
    with contextlib.ExitStack() as servers:
        started = {name: servers.enter_context(serving(url, environment))
                   for name, environment in environments.items()}  # fmt: skip
        # Each server answers the records as NDJSON and the ids as CSV (/v1/impact/ids).
        http = {name.replace("NDJSON", "CSV ids") if ids else name: (server, ids)
                for name, server in started.items() for ids in (False, True)}  # fmt: skip
        for name, (server, ids) in http.items():
            variants[name] = lambda server=server, ids=ids: _http(server, hot, ids)  # type: ignore[misc]
        samples: dict[str, list[float]] = {name: [] for name in variants}
        rows: dict[str, int | None] = {}
        server_cpu: dict[str, list[float]] = {name: [] for name in http}
        names = list(variants)
        for round_number in range(arguments.repeats + 1):  # round 0 warms caches and plans
            turn = round_number % len(names)
            for name in names[turn:] + names[:turn]:
                running = http[name][0] if name in http else None
                cpu = _cpu_ms(running) if running else 0.0
                began = time.perf_counter()
                rows[name] = await variants[name]()
                if round_number:
                    samples[name].append((time.perf_counter() - began) * 1000)
                    if running:
                        server_cpu[name].append(_cpu_ms(running) - cpu)
        load_average = _load_average()
        peaks = {name: server.peak_rss_bytes() for name, (server, _) in http.items()}
        if arguments.explain:
            for name in ("blast_radius_by_source", "blast_radius_ids_by_source"):
                plan = await _explain(pool, ours[name].sql, ours[name].arguments(values))
                print(f"\n## {name}\n{plan}")
    await pool.close()
    report = Report(
        " ".join(["python -m bench.hottest", f"--records {arguments.records}",
                  f"--repeats {arguments.repeats}"]),
        {**machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
         "records": f"{picks.records:,}", "hottest document": hot,
         "load average at the end (1, 5, 15 min)": load_average},
    )  # fmt: skip
    answers = max(count or 0 for count in rows.values())
    medians = {name: statistics.median(times) for name, times in samples.items()}
    sql = medians["SQL records (blast_radius_by_source, cursor)"]
    for name, times in samples.items():
        peak = (
            f"; server process CPU median {statistics.median(server_cpu[name]):,.0f} ms, "
            f"peak RSS {peaks[name] / 2**20:,.0f} MB"
            if name in peaks
            else ""
        )
        report.add(
            Figure("every answer of the hottest document", name, "ms", medians[name],
                   samples=len(times), versus=ratio(medians[name], sql, "SQL records"),
                   note=f"{rows[name] or answers:,} records; runs "
                   + ", ".join(f"{t:.0f}" for t in times) + " ms" + peak)
        )  # fmt: skip
    print(report.markdown())
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--before", help="an earlier checkout's directory, timed beside this one")
    parser.add_argument("--output", type=Path, default=None)
    parsed = parser.parse_args()
    result = asyncio.run(main(parsed))
    if parsed.output is not None:
        parsed.output.write_text(result.markdown())
