"""Invalidation next to the tutorial SQL, on the generated DAG and on a tutorial-shaped one in the
classic schema (bench/classic.py), in one run: every answer that depends on a transform version
or an index snapshot, as records and as ids, the runs interleaved so drift on the shared
machine falls on both sides.

    python -m bench.invalidation --records 250000             # loads both DAGs anew
    python -m bench.invalidation --records 250000 --reuse     # the databases the last run left
    python -m bench.invalidation --reuse --explain            # and each query's plan (BUFFERS)
    python -m bench.invalidation --url postgresql://…/lineage_bench_…  # one python -m bench loaded

Ours runs as the application role in a tenant transaction (row security on, JIT off, as
reads.run sets them); the tutorial SQL as the superuser (a user's own table has no row
security), JIT off too. Figures are the median of --repeats runs to the last row.
"""

import argparse
import asyncio
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from bench import features
from bench.baselines import TUTORIAL_INVALIDATION_BY_SNAPSHOT, TUTORIAL_INVALIDATION_BY_VERSION
from bench.classic import load_classic, write_tutorial_table
from bench.dag import Picks
from bench.database import load, recreate, saved_picks, url_for
from bench.figures import Figure, Report, ratio
from bench.run import TENANT, TUTORIAL_INDEX, TUTORIAL_INDEX_NAME, machine
from lineage import db
from lineage.db.named_sql import QUERIES

CLASSIC_TABLE = "tutorial_provenance"
TIMEOUT_MS = 900_000


@dataclass(frozen=True)
class Question:
    """One invalidation question: our named queries (records, ids) and the tutorial's SQL."""

    parameter: str
    records_query: str
    ids_query: str
    tutorial_sql: str

    def value(self, picks: Picks) -> str:
        return picks.transform_version if self.parameter == "transform_version" else picks.snapshot


QUESTIONS = (
    Question(
        "transform_version",
        "invalidate_by_transform_version",
        "invalidate_ids_by_transform_version",
        TUTORIAL_INVALIDATION_BY_VERSION,
    ),
    Question(
        "index_snapshot",
        "invalidate_by_index_snapshot",
        "invalidate_ids_by_index_snapshot",
        TUTORIAL_INVALIDATION_BY_SNAPSHOT,
    ),
)


async def _the_dag(server_url: str, name: str, records: int, reuse: bool) -> tuple[str, Picks]:
    """The database of one DAG: the last run's when asked and there, else loaded anew."""
    dbname = f"lineage_bench_invalidation_{name}_{records}"
    url = url_for(server_url, dbname)
    picks = await saved_picks(url)
    if reuse and picks is not None:
        return url, picks
    url = await recreate(server_url, dbname)
    if name == "classic":
        await write_tutorial_table(url, CLASSIC_TABLE, records)
        picks, _ = await load_classic(url, url, CLASSIC_TABLE, TENANT)
    else:
        picks, _ = await load(url, records, TENANT)
    return url, picks


async def _in_tenant(pool: asyncpg.Pool, sql: str, arguments: list[Any]) -> list[asyncpg.Record]:
    async with db.transaction(pool, TENANT, statement_timeout_ms=TIMEOUT_MS) as connection:
        rows: list[asyncpg.Record] = await connection.fetch(sql, *arguments)
        return rows


async def _time(pool: asyncpg.Pool, sql: str, arguments: list[Any]) -> tuple[float, int]:
    started = time.perf_counter()
    rows = await _in_tenant(pool, sql, arguments)
    return (time.perf_counter() - started) * 1000, len(rows)


async def _one_dag(
    report: Report, dag: str, url: str, picks: Picks, repeats: int, explain: bool
) -> None:
    ours = await db.create_pool(url, min_size=1, max_size=2)
    theirs = await features.superuser_pool(url)
    # The tutorial SQL walks down by `parent_ids @>`, which needs the tutorial's GIN index
    # (lineage's edges are in provenance_children since migration 0035): there for its runs.
    await theirs.execute(TUTORIAL_INDEX)
    try:
        for question in QUESTIONS:
            value = question.value(picks)
            if not value:
                report.notes.append(f"{dag}: no {question.parameter} in the data")
                continue
            values = {"tenant_id": TENANT, "kind": "answer", "max_depth": 20,
                      question.parameter: value}  # fmt: skip
            runs = {
                "tutorial SQL": (theirs, question.tutorial_sql, [TENANT, value]),
                f"sql/{question.records_query}.sql": _named(ours, question.records_query, values),
                f"sql/{question.ids_query}.sql": _named(ours, question.ids_query, values),
            }
            samples: dict[str, list[float]] = {name: [] for name in runs}
            rows: dict[str, int] = {}
            for _ in range(repeats + 1):  # the first round warms the caches, untimed
                for name, (pool, sql, arguments) in runs.items():
                    elapsed, rows[name] = await _time(pool, sql, arguments)
                    samples[name].append(elapsed)
            tutorial = statistics.median(samples["tutorial SQL"][1:])
            group = f"{dag} DAG, {question.parameter} {value}"
            for name, timings in samples.items():
                median = statistics.median(timings[1:])
                versus = "" if name == "tutorial SQL" else ratio(median, tutorial, "tutorial")
                runs_ms = ", ".join(f"{t:.0f}" for t in timings[1:])
                report.add(
                    Figure(group, name, "ms", median, samples=repeats, versus=versus,
                           note=f"{rows[name]:,} answers; runs {runs_ms} ms")
                )  # fmt: skip
            if explain:
                for name, (pool, sql, arguments) in runs.items():
                    plan = await _in_tenant(pool, "EXPLAIN (ANALYZE, BUFFERS) " + sql, arguments)
                    print(f"\n## {group}: {name}\n" + "\n".join(row[0] for row in plan))
    finally:
        await theirs.execute(f"DROP INDEX IF EXISTS {TUTORIAL_INDEX_NAME}")
        await theirs.close()
        await ours.close()


def _named(
    pool: asyncpg.Pool, name: str, values: dict[str, Any]
) -> tuple[asyncpg.Pool, str, list[Any]]:
    query = QUERIES[name]
    return pool, query.sql, query.arguments(values)


async def main(
    server_url: str, records: int, reuse: bool, repeats: int, explain: bool, url: str | None
) -> Report:
    if url is not None:
        return await loaded(url, repeats, explain)
    report = Report(
        f"python -m bench.invalidation --records {records} --repeats {repeats}",
        {**machine(), "records per DAG": f"{records:,}"},
    )
    for dag in ("generated", "classic"):
        url, picks = await _the_dag(server_url, dag, records, reuse)
        report.context[f"{dag} DAG"] = f"{picks.records:,} records, {picks.answers:,} answers"
        await _one_dag(report, dag, url, picks, repeats, explain)
    print(report.markdown())
    return report


async def loaded(url: str, repeats: int, explain: bool) -> Report:
    """The same questions on a database `python -m bench` loaded (its bench_picks), as it is."""
    picks = await saved_picks(url)
    if picks is None:
        raise SystemExit(f"{url} holds no bench_picks: load it with python -m bench first")
    report = Report(f"python -m bench.invalidation --url {url} --repeats {repeats}", machine())
    report.context["DAG"] = f"{picks.records:,} records, {picks.answers:,} answers"
    await _one_dag(report, "loaded", url, picks, repeats, explain)
    print(report.markdown())
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--records", type=int, default=250_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--url", default=None, help="a database python -m bench loaded")
    parser.add_argument("--output", type=Path, default=None)
    arguments = parser.parse_args()
    report = asyncio.run(
        main(arguments.server_url, arguments.records, arguments.reuse, arguments.repeats,
             arguments.explain, arguments.url)
    )  # fmt: skip
    if arguments.output is not None:
        arguments.output.write_text(report.markdown())
