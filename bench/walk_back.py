"""Walk-back of sql/walk_back.sql next to other versions of the file and the tutorial SQL, on the
invalidation benchmark's generated DAG, interleaved answer by answer so drift on the shared
machine falls on every side alike:

    python -m bench.invalidation --records 250000       # loads the DAG once
    git show main~3:lineage/sql/walk_back.sql > /tmp/before.sql
    python -m bench.walk_back --records 250000 --sql /tmp/before.sql

Every version runs as the application role in one tenant transaction (row security on, JIT
off, as walks.run sets them; --plan-cache-mode forces custom or generic plans); the current
file also as the owner, whom row security does not confine (a superuser on this server), so
the difference is what row security costs.
"""

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

import asyncpg

from bench import features
from bench.baselines import TUTORIAL_WALK_BACK
from bench.database import saved_picks, url_for
from bench.figures import Figure, Report, percentile, ratio
from bench.run import TENANT, machine
from lineage import db
from lineage.db.named_sql import QUERIES, NamedQuery, parse

TUTORIAL = "tutorial SQL (UNION ALL, = ANY)"
CURRENT = "sql/walk_back.sql"
OWNER = "sql/walk_back.sql as the owner (no row security)"


async def main(
    server_url: str, records: int, samples: int, versions: list[Path], plan_cache_mode: str
) -> Report:
    url = url_for(server_url, f"lineage_bench_invalidation_generated_{records}")
    picks = await saved_picks(url)
    if picks is None:
        raise SystemExit(f"no DAG of {records:,} records: run python -m bench.invalidation first")
    queries: dict[str, NamedQuery] = {CURRENT: QUERIES["walk_back"]}
    queries |= {str(path): parse(path.read_text(), "walk_back") for path in versions}
    report = Report(
        f"python -m bench.walk_back --records {records} --samples {samples} "
        f"--plan-cache-mode {plan_cache_mode}",
        {**machine(), "DAG": f"{picks.records:,} records", "load average": _load()},
    )
    answers = picks.answer_ids[:samples]
    timings: dict[str, list[float]] = {name: [] for name in [TUTORIAL, *queries, OWNER]}
    ours = await db.create_pool(url, min_size=1, max_size=1)
    theirs = await features.superuser_pool(url)
    try:
        async with db.transaction(ours, TENANT) as app, theirs.acquire() as owner:
            for connection in (app, owner):
                await connection.execute(
                    "SELECT set_config('jit', 'off', false), "
                    "set_config('plan_cache_mode', $1, false)",
                    plan_cache_mode,
                )
            for timed in (False, True):  # the first pass warms the caches, untimed
                for answer in answers:
                    values = {"tenant_id": TENANT, "context_id": answer, "max_depth": 20}
                    runs: list[tuple[str, Any, str, list[Any]]] = [
                        (TUTORIAL, owner, TUTORIAL_WALK_BACK, [TENANT, answer])
                    ]
                    runs += [(n, app, q.sql, q.arguments(values)) for n, q in queries.items()]
                    current = queries[CURRENT]
                    runs.append((OWNER, owner, current.sql, current.arguments(values)))
                    for name, connection, sql, arguments in runs:
                        elapsed = await _time(connection, sql, arguments)
                        if timed:
                            timings[name].append(elapsed)
    finally:
        await theirs.close()
        await ours.close()
    tutorial = percentile(timings[TUTORIAL], 0.5)
    for name, samples_ms in timings.items():
        p50 = percentile(samples_ms, 0.5)
        versus = "" if name == TUTORIAL else ratio(p50, tutorial, "tutorial")
        report.add(Figure.timed("walk-back of an answer", name, samples_ms, versus=versus))
    report.context["load average after"] = _load()
    print(report.markdown())
    return report


async def _time(connection: asyncpg.Connection, sql: str, arguments: list[Any]) -> float:
    started = time.perf_counter()
    await connection.fetch(sql, *arguments)
    return (time.perf_counter() - started) * 1000


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--records", type=int, default=250_000)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--sql", type=Path, action="append", default=[],
                        help="another version of sql/walk_back.sql to time beside it")  # fmt: skip
    parser.add_argument("--plan-cache-mode", default="auto",
                        choices=["auto", "force_custom_plan", "force_generic_plan"],
                        help="PostgreSQL's choice for the statements asyncpg prepares")  # fmt: skip
    arguments = parser.parse_args()
    asyncio.run(
        main(arguments.server_url, arguments.records, arguments.samples, arguments.sql,
             arguments.plan_cache_mode)
    )  # fmt: skip
