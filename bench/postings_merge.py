"""What the background round's merge of small postings rows (migration 0049) does to records
appended as a pipeline appends them: the rows and bytes, the merge's own time and WAL, and the
reads of the hottest keys before and after.

    python -m bench.postings_merge --records 50000 --batch 10

In a private PostgreSQL 15 (tests/private_postgres.py): the tutorial DAG of bench/classic.py,
`--records` rows, appended through PostgresStore `--batch` records an append, as
bench.write_bytes appends them. The database is then copied (CREATE DATABASE ... TEMPLATE) and the
copy's postings merged by the service's own round (lineage.services.postings_merge), then
vacuumed as autovacuum would; the merge's seconds and WAL are those two steps'. The bytes are
each side's after VACUUM FULL: the steady state, in which a live table's next appends reuse the
space of the rows merged away; both sides are then analyzed, as the service's round does. The
reads are the service's named queries, as the application role, for the source with the most
records under it (blast_radius_ids_by_source) and the transform version with the most
(invalidate_ids_by_transform_version): a warm-up, then the median of `--passes`, the two
databases in turn, both listing the same rows.
"""

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import asyncpg

from bench.classic import CLASSIC_COLUMNS, CLASSIC_TABLE, TutorialDag
from bench.write_bytes import TUTORIAL_TABLE, append_lineage, wal_position
from lineage import db
from lineage.db.database import Database
from lineage.db.migrate import migrate
from lineage.db.named_sql import QUERIES
from lineage.services import postings_merge
from lineage.settings import Settings
from tests.citus_cluster import PG15_BIN
from tests.private_postgres import PrivatePostgres

TENANT = "default"
ROWS = """SELECT count(*) AS rows,
       sum(coalesce(cardinality(context_uuids), 0) + coalesce(cardinality(context_ids), 0)) AS ids,
       (SELECT sum(pg_total_relation_size(relid))
        FROM pg_partition_tree('invalidation_postings')) AS bytes
FROM invalidation_postings"""
# The key of each prefix under which the most ids are posted.
HOTTEST = """SELECT substr(k.key, length($1) + 1) AS value
FROM invalidation_postings AS ip JOIN invalidation_keys AS k USING (tenant_id, key_no)
WHERE k.key LIKE $1 || '%'
GROUP BY k.key
ORDER BY sum(coalesce(cardinality(ip.context_uuids), 0) + coalesce(cardinality(ip.context_ids), 0))
         DESC, k.key
LIMIT 1"""


async def table_figures(url: str) -> dict[str, Any]:
    connection = await asyncpg.connect(url)
    try:
        await connection.execute("VACUUM FULL invalidation_postings")
        await connection.execute("ANALYZE")  # as the service's round does for a grown tenant
        row = await connection.fetchrow(ROWS)
        records = await connection.fetchval("SELECT count(*) FROM provenance")
    finally:
        await connection.close()
    return {
        "rows": row["rows"],
        "ids_a_row": round(row["ids"] / row["rows"], 1),
        "bytes_a_record": round(row["bytes"] / records),
    }


async def merge(url: str) -> dict[str, Any]:
    """The service's round on the copy, timed with the VACUUM autovacuum would run after it."""
    database = await Database.connect(Settings(), url, min_size=1, max_size=2)
    connection = await asyncpg.connect(url)
    try:
        records = await connection.fetchval("SELECT count(*) FROM provenance")
        before = await wal_position(url)
        started = time.perf_counter()
        done = await postings_merge.merge_pending(database)
        await connection.execute("VACUUM invalidation_postings")
        seconds = time.perf_counter() - started
        wal = await wal_position(url) - before
    finally:
        await connection.close()
        await database.close()
    merged = done[TENANT]
    return {
        "seconds": round(seconds, 2),
        "records_per_s": round(merged.records / seconds),
        "wal_bytes_a_record": round(wal / records),
        "rows_merged": merged.rows_merged,
        "rows_written": merged.rows_written,
    }


async def questions(url: str) -> list[tuple[str, dict[str, Any]]]:
    connection = await asyncpg.connect(url)
    try:
        source = await connection.fetchval(HOTTEST, "source:")
        version = await connection.fetchval(HOTTEST, "transform_version:")
    finally:
        await connection.close()
    common = {"tenant_id": TENANT, "max_depth": 20}
    return [
        ("blast_radius_ids_by_source", {**common, "source_uri": source, "kind": "all"}),
        ("invalidate_ids_by_transform_version",
         {**common, "transform_version": version, "kind": "any"}),
    ]  # fmt: skip


async def timed(pool: asyncpg.Pool, name: str, values: dict[str, Any]) -> tuple[float, int]:
    query = QUERIES[name]
    started = time.perf_counter()
    async with db.transaction(pool, TENANT) as connection:
        rows = await connection.fetch(query.sql, *query.arguments(values))
    return (time.perf_counter() - started) * 1000, len(rows)


async def reads(before_url: str, after_url: str, passes: int) -> dict[str, Any]:
    settings = Settings()
    before = await Database.connect(settings, before_url, min_size=1, max_size=1)
    after = await Database.connect(settings, after_url, min_size=1, max_size=1)
    figures: dict[str, Any] = {}
    try:
        for name, values in await questions(before_url):
            ms: dict[str, list[float]] = {"before": [], "after": []}
            answers = {}
            for round_number in range(passes + 1):
                sides = [("before", before), ("after", after)]
                for side, database in sides if round_number % 2 else sides[::-1]:
                    took, answers[side] = await timed(database.pool, name, values)
                    if round_number:  # the first pass warms the caches
                        ms[side].append(took)
            assert answers["before"] == answers["after"], (name, answers)
            figures[name] = {
                "answers": answers["after"],
                **{side: round(statistics.median(times), 1) for side, times in ms.items()},
            }
    finally:
        await before.close()
        await after.close()
    return figures


async def run(records: int, batch: int, passes: int) -> dict[str, Any]:
    server = PrivatePostgres(bin_dir=PG15_BIN)
    server.start()
    try:
        base = server.url.rsplit("/", 1)[0]
        admin = await asyncpg.connect(server.url)
        try:
            for name in ("tutorial", "appended"):
                await admin.execute(f"CREATE DATABASE {name}")
            tutorial_url, before_url = f"{base}/tutorial", f"{base}/appended"
            migrate(before_url)
            tutorial = await asyncpg.connect(tutorial_url)
            try:
                await tutorial.execute(CLASSIC_TABLE.format(table=TUTORIAL_TABLE))
                await tutorial.copy_records_to_table(
                    TUTORIAL_TABLE, records=list(TutorialDag(records).rows()),
                    columns=CLASSIC_COLUMNS,
                )  # fmt: skip
            finally:
                await tutorial.close()
            appended = await append_lineage(before_url, tutorial_url, batch, 0)
            await admin.execute("CREATE DATABASE merged TEMPLATE appended")
        finally:
            await admin.close()
        after_url = f"{base}/merged"
        merged = await merge(after_url)
        report = {
            "records": appended["records"],
            "batch": batch,
            "append_records_per_s": round(appended["records"] / appended["seconds"]),
            "merge": merged,
            "before": await table_figures(before_url),
            "after": await table_figures(after_url),
            "reads_ms": await reads(before_url, after_url, passes),
        }
    finally:
        server.destroy()
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=10, help="records an append")
    parser.add_argument("--passes", type=int, default=7)
    arguments = parser.parse_args()
    report = asyncio.run(run(arguments.records, arguments.batch, arguments.passes))
    print(json.dumps(report, indent=2))
