"""Retention by time at size: what the month partitions cost the reads and appends that must
stay as fast, and how long expiring a month takes.

    python -m bench.retention --size 100k --server-url postgresql://postgres@127.0.0.1:5432/postgres

Loads the synthetic DAG (bench/dag.py: 90 days from 2026-01-01, so three months) into a
database migrated to the revision before partitioning (0015) and times walk-backs, lookups by
id and the append's parent check; migrates it to the partitioned layout (0016, which copies
every row into month partitions, from January 2026 to two months past today), times the same on
the same data, and batch appends; then sets a one-month period and expires January (`lineage
retention apply` as of 2026-03-01), timing the drop. Medians over the same picks.
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
REPEAT = 3


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
    after: Timings
    generic: Timings  # partitioned, with plan_cache_mode = force_generic_plan
    migrate_s: float
    month_records: int
    expiry_s: float
    receipt: dict[str, Any] = field(default_factory=dict)

    def markdown(self, server: str) -> str:
        def row(name: str, before: float, after: float, generic: float, unit: str) -> str:
            change = (after - before) / before * 100 if before else 0.0
            return (
                f"| {name} | {before:,.2f} {unit} | {after:,.2f} {unit} | {change:+.0f}% "
                f"| {generic:,.2f} {unit} |"
            )

        b, a, g = self.before, self.after, self.generic
        return "\n".join(
            [
                f"# Retention by time partitions: {self.records:,} records",
                "",
                f"Server: {server}. Same data before (unpartitioned, revision "
                f"{BEFORE_PARTITIONS}) and after (month partitions: {a.partitions} of "
                "provenance, three of them holding the data). Medians.",
                "",
                "| question | unpartitioned | partitioned | change | partitioned, generic plans |",
                "| --- | --- | --- | --- | --- |",
                row("walk-back of an answer (sql/walk_back.sql)", b.walk_back_ms,
                    a.walk_back_ms, g.walk_back_ms, "ms"),
                row("lookup of 1 record by id (sql/get_contexts.sql)", b.lookup_ms,
                    a.lookup_ms, g.lookup_ms, "ms"),
                row("parent check of 100 parents (sql/stored_root_sources.sql)",
                    b.parent_check_ms, a.parent_check_ms, g.parent_check_ms, "ms"),
                "",
                f"Batch appends, partitioned, 500 records a batch: "
                f"{a.append_records_per_s:,.0f} records/s (each record's id is checked in every "
                "month partition, a probe like the parent check's).",
                "",
                f"Migrating the {self.records:,} records into partitions (0016): "
                f"{self.migrate_s:.1f} s.",
                "",
                f"Expiring January 2026 ({self.month_records:,} records, and their signatures, "
                f"edges and root sources) with `lineage retention apply`: {self.expiry_s:.2f} s.",
                "",
            ]
        )  # fmt: skip


async def _median(calls: list[Callable[[], Awaitable[Any]]]) -> float:
    samples = []
    for _ in range(REPEAT):
        for call in calls:
            started = time.perf_counter()
            await call()
            samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def _fetch(pool: asyncpg.Pool, name: str, **values: Any) -> None:
    async with db.transaction(pool, "default") as connection:
        await db.fetch(connection, name, tenant_id="default", **values)


async def measure_reads(url: str, answers: list[str], tag: str, appends: bool) -> Timings:
    owner = await asyncpg.connect(url)
    try:
        await owner.execute("VACUUM ANALYZE")
        chunks = [
            row["context_id"]
            for row in await owner.fetch(
                "SELECT context_id FROM provenance WHERE kind = 'chunk' "
                "ORDER BY md5(context_id) LIMIT 1000"
            )
        ]
        partitions = await owner.fetchval(
            "SELECT count(*) FROM pg_inherits WHERE inhparent = 'provenance'::regclass"
        )
    finally:
        await owner.close()
    pool = await db.create_pool(url, max_size=2)
    try:
        timings = Timings(partitions=partitions)
        timings.walk_back_ms = await _median(
            [partial(_fetch, pool, "walk_back", context_id=a, max_depth=20) for a in answers]
        )
        timings.lookup_ms = await _median(
            [partial(_fetch, pool, "get_contexts", context_ids=[c]) for c in chunks[:50]]
        )
        timings.parent_check_ms = await _median(
            [
                partial(_fetch, pool, "stored_root_sources", context_ids=chunks[i : i + 100])
                for i in range(0, 1000, 100)
            ]
        )
        if appends:  # the append path of this code writes the partitioned layout only
            generated = proposals(ingest_rows(5000, f"append_{tag}", "default"))
            store = PostgresStore(Database(pool, Settings()), "default")
            started = time.perf_counter()
            for start in range(0, len(generated), 500):
                await store.append(generated[start : start + 500])
            timings.append_records_per_s = len(generated) / (time.perf_counter() - started)
        return timings
    finally:
        await pool.close()


async def measure(records: int, server_url: str) -> Figures:
    url = await recreate(server_url, DBNAME, BEFORE_PARTITIONS)
    try:
        picks, _ = await load(url, records)
        answers = picks.answer_ids[:20]
        owner = await asyncpg.connect(url)
        try:
            records = await owner.fetchval("SELECT count(*) FROM provenance")
        finally:
            await owner.close()
        before = await measure_reads(url, answers, "before", appends=False)
        started = time.perf_counter()
        migrate(url)
        migrate_s = time.perf_counter() - started
        after = await measure_reads(url, answers, "after", appends=True)
        # Planning a query over every month's partition is most of its time: a generic plan
        # (planned once per connection) leaves the probes alone.
        owner = await asyncpg.connect(url)
        try:
            await owner.execute(
                f'ALTER DATABASE "{DBNAME}" SET plan_cache_mode = force_generic_plan'
            )
        finally:
            await owner.close()
        generic = await measure_reads(url, answers, "generic", appends=False)
        owner = await Database.connect(Settings(), url, max_size=2, as_owner=True)
        try:
            month_records = await owner.pool.fetchval("SELECT count(*) FROM provenance_p2026_01")
            await retention.set_policy(owner, 1)
            started = time.perf_counter()
            receipt = await retention.apply(owner, EXPIRY_AS_OF)
            expiry_s = time.perf_counter() - started
        finally:
            await owner.close()
        return Figures(records, before, after, generic, migrate_s, month_records, expiry_s, receipt)
    finally:
        await drop(server_url, DBNAME)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="100k", help="100k, 1M or a number of records")
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--output", type=Path, default=Path("bench/RESULTS-retention.md"))
    arguments = parser.parse_args()
    figures = asyncio.run(measure(parse_size(arguments.size), arguments.server_url))
    text = figures.markdown(arguments.server_url.rsplit("@", 1)[-1])
    arguments.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
