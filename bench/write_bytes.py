"""What writing a record costs in bytes: the WAL each record generates and the bytes it is
stored in, for a COPY into the tutorial table against lineage's batch append of the same
records, every feature on.

    python -m bench.write_bytes --records 50000

Both run in one private PostgreSQL 15 (tests/private_postgres.py) that nothing else writes to,
so its WAL position moves only for what is measured. The tutorial side: the classic table
(bench/classic.py: primary key, GIN on parent_ids) with the b-trees a user adds on source_uri
and version, filled by one COPY of `--records` generated rows. The lineage side: the same rows,
read from that table as `python -m bench --classic-table` reads them, appended through
PostgresStore as the application role, `--batch` records an append (signing, row security,
the verifiable log's queue, root sources, postings, events), and then the log sequenced and
checkpointed (the leaves and tree nodes the verifiable log keeps for each record). Reported per
record: WAL bytes and stored bytes (every table and index, after minus before), and lineage's
over the tutorial's; and each side's rate in records a second, the append's as a share of the
COPY's. The COPY's rate is the median of three COPYs into a new table (a COPY of 50,000 rows
lasts a fraction of a second, so one varied by a third from run to run).
"""

import argparse
import asyncio
import json
import os
import statistics
import time
from typing import Any

import asyncpg

from bench.classic import CLASSIC_COLUMNS, CLASSIC_TABLE, TutorialDag, read_classic
from bench.dag import COLUMNS
from lineage.core.record import NewContext
from lineage.db.database import Database
from lineage.db.migrate import migrate
from lineage.services import postings_merge
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from lineage.verifiable_log import storage
from tests.citus_cluster import PG15_BIN
from tests.private_postgres import PrivatePostgres

TENANT = "default"
TUTORIAL_TABLE = "classic_provenance"
# The indexes the tutorial adds for its own lookups by document and by version.
USER_INDEXES = ("CREATE INDEX ON {table} (source_uri)", "CREATE INDEX ON {table} (version)")
COPY_TIMINGS = 3
SCRATCH_TABLE = "classic_provenance_timed"  # the further COPYs timed, dropped after each
# Each table's bytes with its indexes and TOAST, a partitioned table's partitions under its name.
STORED_BYTES = """SELECT coalesce(pg_partition_root(c.oid), c.oid)::regclass::text AS name,
       sum(pg_total_relation_size(c.oid))::bigint AS bytes
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'm')
GROUP BY 1"""
# The same bytes relation by relation: each table's heap with its TOAST, and each index.
RELATION_BYTES = """SELECT coalesce(pg_partition_root(c.oid), c.oid)::regclass::text AS name,
       sum(CASE WHEN c.relkind = 'i' THEN pg_relation_size(c.oid)
                ELSE pg_table_size(c.oid) END)::bigint AS bytes
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'm', 'i')
GROUP BY 1"""
# Fields of a project row (bench.dag.COLUMNS) a caller gives; the append stamps created_at.
PROPOSED = ("context_id", "parent_ids", "kind", "source_uri", "content_hash", "transform",
            "transform_version", "produced_by", "index_snapshot", "trace_id")  # fmt: skip


async def wal_position(url: str) -> int:
    connection = await asyncpg.connect(url)
    try:
        return int(await connection.fetchval("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"))
    finally:
        await connection.close()


async def stored_bytes(url: str, query: str = STORED_BYTES) -> dict[str, int]:
    connection = await asyncpg.connect(url)
    try:
        return {row["name"]: int(row["bytes"]) for row in await connection.fetch(query)}
    finally:
        await connection.close()


def grown(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """What each table grew by, largest first, tables that did not grow left out."""
    growth = {name: size - before.get(name, 0) for name, size in after.items()}
    return dict(sorted(((n, g) for n, g in growth.items() if g > 0), key=lambda item: -item[1]))


async def copy_tutorial(url: str, records: int) -> dict[str, Any]:
    connection = await asyncpg.connect(url)
    try:
        rows = list(TutorialDag(records).rows())
        await connection.execute("CHECKPOINT")
        before_wal, before_stored = await wal_position(url), await stored_bytes(url)
        seconds = [await timed_copy(connection, TUTORIAL_TABLE, rows)]
        result = measured(len(rows), before_wal, before_stored, await wal_position(url))
        # A COPY of 50,000 rows takes under a second: its rate is the median of three.
        for _ in range(COPY_TIMINGS - 1):
            seconds.append(await timed_copy(connection, SCRATCH_TABLE, rows))
            await connection.execute(f"DROP TABLE {SCRATCH_TABLE}")
    finally:
        await connection.close()
    result["seconds"] = statistics.median(seconds)
    result["each_seconds"] = seconds
    return result


async def timed_copy(connection: asyncpg.Connection, table: str, rows: list[Any]) -> float:
    """Seconds to COPY `rows` into a new tutorial table named `table`, its indexes made first."""
    await connection.execute(CLASSIC_TABLE.format(table=table))
    for statement in USER_INDEXES:
        await connection.execute(statement.format(table=table))
    started = time.perf_counter()
    await connection.copy_records_to_table(table, records=rows, columns=CLASSIC_COLUMNS)
    return time.perf_counter() - started


def measured(
    records: int, before_wal: int, before_stored: dict[str, int], after_wal: int
) -> dict[str, Any]:
    return {"records": records, "wal_bytes": after_wal - before_wal, "before_stored": before_stored}


async def merge_round(database: Database, url: str) -> None:
    """What the service's background round does to the postings (lineage.services.
    postings_merge), then the VACUUM autovacuum would run on the rows it deleted, so that the
    next appends reuse their space."""
    await postings_merge.merge_pending(database)
    connection = await asyncpg.connect(url)
    try:
        await connection.execute("VACUUM invalidation_postings")
    finally:
        await connection.close()


async def append_lineage(url: str, source_url: str, batch: int, merge_every: int) -> dict[str, Any]:
    dag = await read_classic(source_url, TUTORIAL_TABLE, TENANT)
    proposals = [
        NewContext(**{name: row[COLUMNS.index(name)] for name in PROPOSED}) for row, _ in dag.rows
    ]
    settings = Settings()
    database = await Database.connect(settings, url, min_size=1, max_size=2)
    owner = await Database.connect(settings, url, min_size=1, max_size=2, as_owner=True)
    try:
        store = PostgresStore(database, TENANT)
        await store.append(proposals[:1])  # the keyring, the partitions, the first log head
        await storage.checkpoint(owner, settings, TENANT)
        connection = await asyncpg.connect(url)
        try:
            await connection.execute("CHECKPOINT")
        finally:
            await connection.close()
        before_wal, before_stored = await wal_position(url), await stored_bytes(url)
        before_relations = await stored_bytes(url, RELATION_BYTES)
        started = time.perf_counter()
        merged_at = 1
        for start in range(1, len(proposals), batch):
            await store.append(proposals[start : start + batch])
            if merge_every and start + batch - merged_at >= merge_every:
                await merge_round(database, url)
                merged_at = start + batch
        if merge_every:
            await merge_round(database, url)
        seconds = time.perf_counter() - started
        appended_wal = await wal_position(url)
        await storage.checkpoint(owner, settings, TENANT)
        sequenced_wal = await wal_position(url)
    finally:
        await owner.close()
        await database.close()
    result = measured(len(proposals) - 1, before_wal, before_stored, appended_wal)
    result["wal_bytes_with_the_log"] = sequenced_wal - before_wal
    result["seconds"] = seconds
    result["before_relations"] = before_relations
    return result


async def run(records: int, batch: int, merge_every: int) -> dict[str, Any]:
    server = PrivatePostgres(bin_dir=PG15_BIN)
    server.start()
    try:
        admin = await asyncpg.connect(server.url)
        try:
            for name in ("tutorial", "lineage"):
                await admin.execute(f"CREATE DATABASE {name}")
        finally:
            await admin.close()
        tutorial_url = server.url.rsplit("/", 1)[0] + "/tutorial"
        lineage_url = server.url.rsplit("/", 1)[0] + "/lineage"
        migrate(lineage_url)
        tutorial = await copy_tutorial(tutorial_url, records)
        tutorial_grown = grown(tutorial["before_stored"], await stored_bytes(tutorial_url))
        appended = await append_lineage(lineage_url, tutorial_url, batch, merge_every)
        lineage_grown = grown(appended["before_stored"], await stored_bytes(lineage_url))
        lineage_relations = grown(
            appended["before_relations"], await stored_bytes(lineage_url, RELATION_BYTES)
        )
    finally:
        server.destroy()
    tutorial_n, lineage_n = tutorial["records"], appended["records"]
    tutorial_stored, lineage_stored = sum(tutorial_grown.values()), sum(lineage_grown.values())
    per = {
        "tutorial_copy": {
            "records_per_s": round(tutorial_n / tutorial["seconds"]),
            "records_per_s_each": [round(tutorial_n / each) for each in tutorial["each_seconds"]],
            "wal_bytes_per_record": round(tutorial["wal_bytes"] / tutorial_n),
            "stored_bytes_per_record": round(tutorial_stored / tutorial_n),
        },
        "lineage_append": {
            "records_per_s": round(lineage_n / appended["seconds"]),
            "wal_bytes_per_record": round(appended["wal_bytes"] / lineage_n),
            "wal_bytes_per_record_with_the_log": round(
                appended["wal_bytes_with_the_log"] / lineage_n
            ),
            "stored_bytes_per_record": round(lineage_stored / lineage_n),
            "stored_bytes_per_record_by_table": {
                name: round(size / lineage_n) for name, size in lineage_grown.items()
            },
            "stored_bytes_per_record_by_relation": {
                name: round(size / lineage_n) for name, size in lineage_relations.items()
            },
        },
    }
    tutorial_per, lineage_per = per["tutorial_copy"], per["lineage_append"]
    return {
        "records": {"tutorial": tutorial_n, "lineage": lineage_n},
        "batch": batch,
        "merge_every": merge_every,
        "load_average": [round(value, 2) for value in os.getloadavg()],
        **per,
        "lineage_over_tutorial": {
            # The batch append's rate as a share of the COPY's, the same records (the log's
            # sequencing, which runs behind the append, is not in it).
            "append_rate_of_copy": round(
                lineage_per["records_per_s"] / tutorial_per["records_per_s"], 3
            ),
            "wal": round(
                lineage_per["wal_bytes_per_record"] / tutorial_per["wal_bytes_per_record"], 2
            ),
            "wal_with_the_log": round(
                lineage_per["wal_bytes_per_record_with_the_log"]
                / tutorial_per["wal_bytes_per_record"],
                2,
            ),
            "stored": round(
                lineage_per["stored_bytes_per_record"] / tutorial_per["stored_bytes_per_record"], 2
            ),
        },
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=1000, help="records an append")
    parser.add_argument(
        "--merge-every",
        type=int,
        default=0,
        help="records appended between the background round's postings merges (0: none)",
    )
    arguments = parser.parse_args()
    print(
        json.dumps(
            asyncio.run(run(arguments.records, arguments.batch, arguments.merge_every)), indent=2
        )
    )
