"""Retention by time at size: what the partitions cost the reads and appends that must stay
as fast, and how long expiring a month takes.

    python -m bench.retention --size 100k --server-url postgresql://postgres@127.0.0.1:5432/postgres

Loads the synthetic DAG (bench/dag.py: 90 days from 2026-01-01, so three months) into three
databases, and times walk-backs, lookups by id and the append's parent check on each, every call
on the three in turn so that the machine's load weighs on them alike (medians over the same
picks):
- unpartitioned: a database at the revision before partitioning (0015);
- one partition: a database at the head with no retention period (with --time-migration, loaded
  at 0015 and migrated: 0016 moves every row into month partitions, 0019 into one open
  partition, and the migration is timed);
- month partitions: a database at the head with a one-month period set before the load and the
  months from January 2026 to two months past today made, as a year of a running service with
  a 12-month period would have them; then batch appends, and expiring January (`lineage
  retention apply` as of 2026-03-01), the drop timed.
"""

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import asyncpg

from bench.dag import parse_size
from bench.database import drop, load, recreate
from bench.run import ingest_rows, proposals
from lineage import db
from lineage.db.database import Database
from lineage.db.migrate import migrate
from lineage.services import retention
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore

DBNAME = "lineage_bench_retention"
BEFORE_PARTITIONS = "0015"
EXPIRY_AS_OF = datetime(2026, 3, 1, tzinfo=UTC)  # with one month kept, January expires
YEAR_START = datetime(2026, 1, 1, tzinfo=UTC)  # month partitions from here to two months ahead
REPEAT = 3
# Before partitioning (0016) a root_sources row had no created_at to join on: the parent check
# there reads it by id alone, as sql/stored_parents.sql did then.
UNPARTITIONED_PARENT_CHECK = """
    SELECT p.context_id, r.source_uri, r.depth
    FROM unnest($2::text[]) AS wanted (context_id)
    JOIN provenance AS p ON p.tenant_id = $1 AND p.context_id = wanted.context_id
    LEFT JOIN root_sources AS r ON r.tenant_id = $1 AND r.context_id = p.context_id
"""


@dataclass
class Timings:
    walk_back_ms: float = 0.0
    lookup_ms: float = 0.0
    parent_check_ms: float = 0.0
    append_records_per_s: float = 0.0
    partitions: int = 0


@dataclass
class Figures:
    records: int
    before: Timings
    one: Timings  # no period: one open partition
    months: Timings  # a period set: a partition per month
    migrate_s: float | None  # None: not timed
    month_records: int
    expiry_s: float
    receipt: dict[str, Any] = field(default_factory=dict)

    def markdown(self, server: str) -> str:
        def row(name: str, before: float, one: float, months: float, unit: str) -> str:
            def change(after: float) -> str:
                return f"{(after - before) / before * 100 if before else 0.0:+.0f}%"

            return (
                f"| {name} | {before:,.2f} {unit} | {one:,.2f} {unit} ({change(one)}) "
                f"| {months:,.2f} {unit} ({change(months)}) |"
            )

        b, o, m = self.before, self.one, self.months
        return "\n".join(
            [
                f"# Retention by time partitions: {self.records:,} records",
                "",
                f"Server: {server}. The same DAG three times: unpartitioned (revision "
                f"{BEFORE_PARTITIONS}), one partition (no retention period: the default) and "
                f"month partitions (a period set: {m.partitions} partitions of provenance, three "
                "of them holding the data). Medians; changes against unpartitioned.",
                "",
                "| question | unpartitioned | one partition | month partitions |",
                "| --- | --- | --- | --- |",
                row("walk-back of an answer (sql/walk_back.sql)", b.walk_back_ms,
                    o.walk_back_ms, m.walk_back_ms, "ms"),
                row("lookup of 1 record by id (sql/get_contexts.sql)", b.lookup_ms,
                    o.lookup_ms, m.lookup_ms, "ms"),
                row("parent check of 100 parents (sql/stored_parents.sql)",
                    b.parent_check_ms, o.parent_check_ms, m.parent_check_ms, "ms"),
                f"| batch appends, 500 records a batch | | {o.append_records_per_s:,.0f} "
                f"records/s | {m.append_records_per_s:,.0f} records/s |",
                "",
                f"Migrating the {self.records:,} unpartitioned records to the head (0016 into "
                f"month partitions, then 0019 into one): {self.migrate_s:.1f} s."
                if self.migrate_s is not None
                else "(The migration of unpartitioned records was not timed: --time-migration.)",
                "",
                f"Expiring January 2026 ({self.month_records:,} records, and their signatures, "
                f"edges and root sources) with `lineage retention apply`: {self.expiry_s:.2f} s.",
                "",
            ]
        )  # fmt: skip


async def _fetch(pool: asyncpg.Pool, name: str, **values: Any) -> None:
    async with db.transaction(pool, "default") as connection:
        await db.fetch(connection, name, tenant_id="default", **values)


async def _unpartitioned_parent_check(pool: asyncpg.Pool, context_ids: list[str]) -> None:
    async with db.transaction(pool, "default") as connection:
        await connection.fetch(UNPARTITIONED_PARENT_CHECK, "default", context_ids)


@dataclass
class Layout:
    """One loaded database and the calls timed on it."""

    url: str
    answers: list[str]
    appends: bool
    revision: str = "head"
    timings: Timings = field(default_factory=Timings)


async def _calls(
    layout: Layout, pool: asyncpg.Pool
) -> dict[str, list[Callable[[], Awaitable[Any]]]]:
    owner = await asyncpg.connect(layout.url)
    try:
        await owner.execute("VACUUM ANALYZE")
        chunks = [
            row["context_id"]
            for row in await owner.fetch(
                "SELECT context_id FROM provenance WHERE kind = 'chunk' "
                "ORDER BY md5(context_id) LIMIT 1000"
            )
        ]
        layout.timings.partitions = await owner.fetchval(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'provenance'::regclass"
        )
    finally:
        await owner.close()
    if layout.revision == BEFORE_PARTITIONS:
        parent_check = partial(_unpartitioned_parent_check, pool)
    else:
        parent_check = partial(_fetch, pool, "stored_parents")
    return {
        "walk_back_ms": [
            partial(_fetch, pool, "walk_back", context_id=a, max_depth=20) for a in layout.answers
        ],
        "lookup_ms": [partial(_fetch, pool, "get_contexts", context_ids=[c]) for c in chunks[:50]],
        "parent_check_ms": [
            partial(parent_check, context_ids=chunks[i : i + 100]) for i in range(0, 1000, 100)
        ],
    }


async def measure_interleaved(layouts: list[Layout]) -> None:
    """Each call on every layout in turn, REPEAT times, so that the machine's load weighs on
    all of them alike; medians into each layout's timings. Then batch appends, interleaved."""
    pools = [await db.create_pool(layout.url, max_size=2) for layout in layouts]
    try:
        calls = [await _calls(layout, pool) for layout, pool in zip(layouts, pools, strict=True)]
        for question in calls[0]:
            samples: list[list[float]] = [[] for _ in layouts]
            for _ in range(REPEAT):
                for index in range(len(calls[0][question])):
                    for taken, layout_calls in zip(samples, calls, strict=True):
                        started = time.perf_counter()
                        await layout_calls[question][index]()
                        taken.append((time.perf_counter() - started) * 1000)
            for layout, taken in zip(layouts, samples, strict=True):
                setattr(layout.timings, question, statistics.median(taken))
        appending = [(layout, pool) for layout, pool in zip(layouts, pools, strict=True)
                     if layout.appends]  # fmt: skip
        batches = {
            id(layout): proposals(ingest_rows(5000, f"append_{number}", "default"))
            for number, (layout, _) in enumerate(appending)
        }
        spent = {id(layout): 0.0 for layout, _ in appending}
        for start in range(0, 5000, 500):
            for layout, pool in appending:
                store = PostgresStore(Database(pool, Settings()), "default")
                started = time.perf_counter()
                await store.append(batches[id(layout)][start : start + 500])
                spent[id(layout)] += time.perf_counter() - started
        for layout, _ in appending:
            layout.timings.append_records_per_s = 5000 / spent[id(layout)]
    finally:
        for pool in pools:
            await pool.close()


async def _loaded(url: str, records: int) -> tuple[list[str], int]:
    """Loads the DAG; the answers to walk back and how many records there are."""
    picks, _ = await load(url, records)
    owner = await asyncpg.connect(url)
    try:
        return picks.answer_ids[:20], await owner.fetchval("SELECT count(*) FROM provenance")
    finally:
        await owner.close()


async def measure(records: int, server_url: str, time_migration: bool) -> Figures:
    names = [f"{DBNAME}_{layout}" for layout in ("before", "one", "months")]
    try:
        before_url = await recreate(server_url, names[0], BEFORE_PARTITIONS)
        answers, records = await _loaded(before_url, records)
        one_url = await recreate(
            server_url, names[1], BEFORE_PARTITIONS if time_migration else "head"
        )
        await _loaded(one_url, records)
        migrate_s = None
        if time_migration:
            started = time.perf_counter()
            migrate(one_url)
            migrate_s = time.perf_counter() - started

        months_url = await recreate(server_url, names[2])
        owner = await Database.connect(Settings(), months_url, max_size=2, as_owner=True)
        try:
            await retention.set_policy(owner, 1)
            async with owner.connection() as connection:
                await db.fetch(
                    connection, "partitions_add", from_time=YEAR_START, through=datetime.now(UTC)
                )
        finally:
            await owner.close()
        await _loaded(months_url, records)

        layouts = [
            Layout(before_url, answers, appends=False, revision=BEFORE_PARTITIONS),
            Layout(one_url, answers, appends=True),
            Layout(months_url, answers, appends=True),
        ]
        await measure_interleaved(layouts)
        owner = await Database.connect(Settings(), months_url, max_size=2, as_owner=True)
        try:
            month_records = await owner.pool.fetchval("SELECT count(*) FROM provenance_p2026_01")
            started = time.perf_counter()
            receipt = await retention.apply(owner, EXPIRY_AS_OF)
            expiry_s = time.perf_counter() - started
        finally:
            await owner.close()
        before, one, months = (layout.timings for layout in layouts)
        return Figures(records, before, one, months, migrate_s, month_records, expiry_s, receipt)
    finally:
        for name in names:
            await drop(server_url, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="100k", help="100k, 1M or a number of records")
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--output", type=Path, default=Path("bench/RESULTS-retention.md"))
    parser.add_argument(
        "--time-migration", action="store_true",
        help="load the one-partition database unpartitioned and time migrating it to the head",
    )  # fmt: skip
    arguments = parser.parse_args()
    figures = asyncio.run(
        measure(parse_size(arguments.size), arguments.server_url, arguments.time_migration)
    )
    text = figures.markdown(arguments.server_url.rsplit("@", 1)[-1])
    arguments.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
