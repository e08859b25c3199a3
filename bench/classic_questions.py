"""The design card's questions on a classic-schema table, each beside the tutorial SQL on that
table itself, in one run: every answer of the hottest document, and every answer that depends
on an old transform version or on an index snapshot, as ids and as records.

    python -m bench.classic --table public.classic_provenance --records 1500000 --url URL
    python -m bench.classic_questions --classic-url URL --table public.classic_provenance
    python -m bench.classic_questions --classic-url URL --reuse   # lineage as it loaded it last

The tutorial side is the classic table as a tutorial makes it (primary key, GIN on parent_ids)
with the b-trees a user adds for these questions (source_uri, transform and version,
snapshot), vacuumed, read as its owner with the recursive `parent_ids @>` walk. lineage's side
is the same records loaded into a database of their own on the same server (`lineage_bench_
questions_` and the classic database's name, as `python -m bench --classic-table` loads them,
nothing appended beside, then every record queued and sequenced into the verifiable log as
appends leave them), read through `reads.run` as the application role (row security on,
every row made a node, as the CLI gets them), and as the service serves them over HTTP: the
ids as its CSV download (copied out by the server) and as its JSON file's objects, the records
as its NDJSON lines (both written by the database). The runs are interleaved, a warm-up round
first; each figure is the median of --repeats to the last row. Then the walk down from typical
starts: every answer below each of --starts documents and chunks picked at random (seeded), the
tutorial's walk from its id beside lineage's blast_radius from it (records, through reads.run)
and its blast_radius_ids (the ids), start by start, the side that goes first rotating, the
second of two passes timed: p50 and p90 of each side.
"""

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from bench.classic import load_classic, quoted_table
from bench.dag import Picks
from bench.database import recreate, saved_picks, url_for
from bench.run import TENANT
from lineage.db.database import Database
from lineage.services import reads
from lineage.settings import Settings
from lineage.verifiable_log import storage

# The indexes a user adds to the tutorial table for these questions.
USER_INDEXES = {"source_uri": "source_uri", "version": "transform, version", "snapshot": "snapshot"}
# Each record an event in append order, so the verifiable log's sequencer takes it (the stream's
# positions are the append's: one counter row a tenant).
QUEUE_EVERY_RECORD = """
WITH queued AS (
    INSERT INTO events (tenant_id, position, context_id)
    SELECT $1, row_number() OVER (ORDER BY created_at, context_id), context_id
    FROM provenance WHERE tenant_id = $1
    RETURNING position
)
INSERT INTO tenant_counters (tenant_id, counter, last_value)
SELECT $1, 'events', max(position) FROM queued
ON CONFLICT (tenant_id, counter) DO UPDATE SET last_value = excluded.last_value"""
# Every table with its indexes and TOAST, a partitioned table's partitions under its name (the
# tutorial's: its table alone).
LINEAGE_TABLE_BYTES = """SELECT coalesce(pg_partition_root(c.oid), c.oid)::regclass::text AS name,
       sum(pg_total_relation_size(c.oid))::bigint AS bytes
FROM pg_class AS c
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' AND c.relname <> 'bench_picks'
GROUP BY 1 ORDER BY 2 DESC"""
LOGGED = """SELECT (SELECT count(*) FROM provenance WHERE tenant_id = $1),
       (SELECT tree_size FROM log_heads WHERE tenant_id = $1)"""
LINEAGE_DATABASE = "lineage_bench_questions_{}"  # and the classic table's database name
DESCENDANTS = """
WITH RECURSIVE down (id, kind, depth) AS (
    SELECT id, kind, 0 FROM {table} WHERE {start}
  UNION
    SELECT c.id, c.kind, d.depth + 1
    FROM down AS d JOIN {table} AS c ON c.parent_ids @> ARRAY[d.id]
    WHERE d.depth < 20
)
"""
IDS = "SELECT DISTINCT id FROM down WHERE kind = 'answer'"
# The answers' records read by their ids alone and copied out by the server in binary, no walk
# and no row decoded by the client: what any answer with records costs at least, each side on
# its own table (lineage's as its owner, the columns its answers hold).
TUTORIAL_BY_ID = "SELECT t.* FROM {table} AS t WHERE t.id = ANY ($1::text[])"
LINEAGE_BY_ID = """SELECT p.context_id, p.parent_ids, p.kind, p.source_uri, p.content_hash,
       p.transform, p.transform_version, p.produced_by, p.index_snapshot, p.trace_id,
       p.created_at, p.attributes
FROM provenance AS p WHERE p.tenant_id = $1 AND p.context_id = ANY ($2)"""
WALK_FROM = "id = $1"  # the tutorial's walk from one record
STARTS_SEED = 7
RECORDS = "SELECT t.* FROM {table} AS t WHERE t.id IN (SELECT id FROM down WHERE kind = 'answer')"
# Each question: where the tutorial starts (the classic table names a transform and its version
# apart, lineage as 'transform@version'), lineage's queries (ids, records) and their argument.
QUESTIONS = (
    ("hottest document", "source_uri = $1", "blast_radius_ids_by_source",
     "blast_radius_by_source", "source_uri"),
    ("invalidation by transform version", "transform = $1 AND version = $2",
     "invalidate_ids_by_transform_version", "invalidate_by_transform_version",
     "transform_version"),
    ("invalidation by index snapshot", "snapshot = $1", "invalidate_ids_by_index_snapshot",
     "invalidate_by_index_snapshot", "index_snapshot"),
)  # fmt: skip


# Each walk down timed: the tutorial's ids, lineage's records (blast_radius, one call of its
# function) and lineage's ids (blast_radius_ids, in a tenant transaction).
WALK_DOWN_SIDES = ("tutorial", "lineage", "lineage ids")


async def walks_down(
    tutorial: asyncpg.Connection, database: Database, settings: Settings, table: str, starts: int
) -> dict[str, Any]:
    """The walk down from `starts` documents and `starts` chunks, each side from the same id
    in turn: p50 and p90 of the second pass, which must find the same answers."""
    tutorial_ids = DESCENDANTS.format(table=table, start=WALK_FROM) + IDS
    picker = random.Random(STARTS_SEED)
    figures: dict[str, Any] = {}
    for kind in ("document", "chunk"):
        ids = [row["id"] for row in await tutorial.fetch(
            f"SELECT id FROM {table} WHERE kind = $1 ORDER BY id LIMIT 20000", kind
        )]  # fmt: skip
        picked = picker.sample(ids, min(starts, len(ids)))
        samples: dict[str, list[float]] = {side: [] for side in WALK_DOWN_SIDES}
        for n, start in enumerate(picked * 2):
            down = {"tenant_id": TENANT, "context_ids": [start], "kind": "answer", "max_depth": 20}
            sides: list[tuple[str, Callable[[], Awaitable[list[Any]]]]] = [
                ("tutorial", partial(tutorial.fetch, tutorial_ids, start)),
                ("lineage", partial(reads.run, database, settings, "blast_radius", **down)),
                ("lineage ids", partial(reads.run, database, settings, "blast_radius_ids", **down)),
            ]
            answers = {}
            for side, run in sides[n % len(sides) :] + sides[: n % len(sides)]:
                elapsed, answers[side] = await timed(run)
                if n >= len(picked):  # the first pass warms the caches
                    samples[side].append(elapsed)
            if len(set(answers.values())) > 1:
                raise AssertionError(f"the walks from {start} found {answers}")
        figures[kind] = {
            "starts": len(picked),
            **{
                side: {
                    "p50_ms": round(statistics.median(times), 2),
                    "p90_ms": round(statistics.quantiles(times, n=10)[-1], 2),
                }
                for side, times in samples.items()
            },
        }
    return figures


async def timed(run: Callable[[], Awaitable[list[Any]]]) -> tuple[float, int]:
    started = time.perf_counter()
    rows = await run()
    return (time.perf_counter() - started) * 1000, len(rows)


async def copied_rows(connection: asyncpg.Connection, sql: str, *arguments: Any) -> list[bytes]:
    """The rows of `sql` as the server copies them out in binary (COPY ... TO STDOUT), counted
    by the row count COPY reports (a byte string for each, empty)."""

    async def discard(chunk: bytes) -> None:
        pass

    status = await connection.copy_from_query(sql, *arguments, output=discard, format="binary")
    return [b""] * int(status.split()[-1])


async def id_lines(
    database: Database, settings: Settings, name: str, values: dict[str, Any]
) -> list[bytes]:
    """The ids as the service's CSV download serves them (reads.copy_id_file), a line each."""
    lines = b"".join(
        [chunk async for chunk in reads.copy_id_file(database, settings, name, **values)]
    )
    return lines.splitlines()


async def id_objects(
    database: Database, settings: Settings, name: str, values: dict[str, Any]
) -> list[bytes]:
    """The ids as the service's JSON ids file has them (reads.id_json), an object each."""
    return [made async for batch in reads.id_json(database, settings, name, **values)
            for _, made in batch]  # fmt: skip


async def record_lines(
    database: Database, settings: Settings, name: str, values: dict[str, Any]
) -> list[bytes]:
    """The records as the service's NDJSON answer has them (reads.record_json), a line each."""
    return [line async for _, line in reads.record_json(database, settings, name, **values)]


def lineage_database_name(classic_url: str) -> str:
    """One lineage database for each database of classic tables, named after it."""
    classic = urlsplit(classic_url).path.strip("/").lower()
    return LINEAGE_DATABASE.format(re.sub(r"[^a-z0-9]+", "_", classic))


async def lineage_database(arguments: argparse.Namespace) -> tuple[str, Picks]:
    """The classic table's records as lineage holds them: loaded anew, or the last load."""
    name = lineage_database_name(arguments.classic_url)
    url = url_for(arguments.classic_url, name)
    picks = await saved_picks(url) if arguments.reuse else None
    if picks is None:
        url = await recreate(arguments.classic_url, name)
        picks, _ = await load_classic(url, arguments.classic_url, arguments.table, TENANT)
        await log_every_record(url)
    return url, picks


async def log_every_record(url: str) -> None:
    """Every loaded record in the tenant's stream and its verifiable log, as appends leave them:
    the bulk load (a COPY) queues nothing, and the log is part of what a record costs."""
    owner = await asyncpg.connect(url)
    try:
        await owner.execute(QUEUE_EVERY_RECORD, TENANT)
    finally:
        await owner.close()
    settings = Settings()
    database = await Database.connect(settings, url, min_size=1, max_size=1)
    try:
        await storage.sequence(database, TENANT)
    finally:
        await database.close()


async def main(arguments: argparse.Namespace) -> dict[str, Any]:
    table = quoted_table(arguments.table)
    lineage_url, picks = await lineage_database(arguments)
    transform, _, version = picks.transform_version.partition("@")
    starts = {
        "source_uri": [picks.hottest_source_uri],
        "transform_version": [transform, version],
        "index_snapshot": [picks.snapshot],
    }
    tutorial = await asyncpg.connect(arguments.classic_url)
    owner = await asyncpg.connect(lineage_url)  # row security binds the service's role
    settings = Settings(statement_timeout_ms=arguments.timeout_ms)
    database = await Database.connect(settings, lineage_url, min_size=1, max_size=2)
    figures: dict[str, Any] = {}
    try:
        for name, columns in USER_INDEXES.items():
            await tutorial.execute(
                f"CREATE INDEX IF NOT EXISTS classic_questions_{name} ON {table} ({columns})"
            )
        # As autovacuum leaves it: a GIN filled by COPY keeps its pending list until a VACUUM,
        # and every probe scans that list (the hottest document took over 60 s, 7.7 s after).
        await tutorial.execute(f"VACUUM ANALYZE {table}")
        await tutorial.execute("SET jit = off")  # as reads.run sets it for lineage
        for question, start_sql, ids_query, records_query, parameter in QUESTIONS:
            start = starts[parameter]
            head = DESCENDANTS.format(table=table, start=start_sql)
            records = head + RECORDS.format(table=table)
            value = "@".join(start)
            answers = [row["id"] for row in await tutorial.fetch(head + IDS, *start)]
            values = {"tenant_id": TENANT, "kind": "answer", "max_depth": 20, parameter: value}
            runs: dict[str, Callable[[], Awaitable[list[Any]]]] = {
                "tutorial ids": partial(tutorial.fetch, head + IDS, *start),
                "tutorial records": partial(tutorial.fetch, records, *start),
                "lineage ids": partial(reads.run, database, settings, ids_query, **values),
                "lineage records": partial(reads.run, database, settings, records_query, **values),
                "lineage ids CSV": partial(id_lines, database, settings, ids_query, values),
                "lineage ids JSON": partial(id_objects, database, settings, ids_query, values),
                "lineage records NDJSON": partial(
                    record_lines, database, settings, records_query, values
                ),
                "tutorial records by id alone": partial(
                    copied_rows, tutorial, TUTORIAL_BY_ID.format(table=table), answers
                ),
                "lineage records by id alone": partial(
                    copied_rows, owner, LINEAGE_BY_ID, TENANT, answers
                ),
            }
            samples: dict[str, list[float]] = {name: [] for name in runs}
            rows: dict[str, int] = {}
            for round_ in range(arguments.repeats + 1):
                for name, run in runs.items():
                    elapsed, rows[name] = await timed(run)
                    if round_:  # the first round warms the caches
                        samples[name].append(elapsed)
            medians = {name: statistics.median(times) for name, times in samples.items()}
            figures[f"{question} ({value})"] = {
                "answers": rows,
                "median_ms": {name: round(ms, 1) for name, ms in medians.items()},
                "faster": {
                    kind: round(medians[f"tutorial {kind}"] / medians[f"lineage {kind}"], 1)
                    for kind in ("ids", "records")
                },
                "faster_as_served": {
                    "ids": round(medians["tutorial ids"] / medians["lineage ids CSV"], 1),
                    "ids as JSON": round(medians["tutorial ids"] / medians["lineage ids JSON"], 1),
                    "records": round(
                        medians["tutorial records"] / medians["lineage records NDJSON"], 1
                    ),
                },
                # 10x on records asks for the whole answer in a tenth of the tutorial's time;
                # reading its records by id alone takes this share of that tenth.
                "records_by_id_of_a_tenth": {
                    side: round(
                        medians[f"{side} records by id alone"] * 10 / medians["tutorial records"], 2
                    )
                    for side in ("tutorial", "lineage")
                },
            }
        walked = await walks_down(tutorial, database, settings, table, arguments.starts)
        tutorial_bytes = await tutorial.fetchval(
            f"SELECT pg_total_relation_size('{table}'::regclass)"
        )
        by_table = {r["name"]: r["bytes"] for r in await owner.fetch(LINEAGE_TABLE_BYTES)}
        [records, logged] = await owner.fetchrow(LOGGED, TENANT)
    finally:
        await database.close()
        await tutorial.close()
        await owner.close()
    return {
        "table": arguments.table,
        "repeats": arguments.repeats,
        "records": {"lineage": records, "in_its_verifiable_log": logged},
        # Everything lineage keeps for the records, their stream and verifiable log included.
        "stored_bytes": {
            "tutorial": tutorial_bytes,
            "lineage": sum(by_table.values()),
            "lineage_over_tutorial": round(sum(by_table.values()) / tutorial_bytes, 2),
            "lineage_by_table": by_table,
        },
        "load_average": [round(value, 2) for value in os.getloadavg()],
        "questions": figures,
        "walks_down": walked,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classic-url", required=True, help="the database of the classic table")
    parser.add_argument("--table", default="public.classic_provenance")
    parser.add_argument("--reuse", action="store_true", help="lineage's database as last loaded")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--starts", type=int, default=200, help="documents and chunks walked from")
    parser.add_argument("--timeout-ms", type=int, default=120_000)
    print(json.dumps(asyncio.run(main(parser.parse_args())), indent=2))
