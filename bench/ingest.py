"""Batch append against a raw COPY into the same indexed table, with the time of each append
split by statement; optionally an earlier checkout's append beside this one's, interleaved.

    python -m bench.ingest --server postgresql://postgres@127.0.0.1:5432/postgres \
        --base 100k --records 10000 --rounds 3 --before /tmp/lineage-main

A fresh database holds a generated DAG of `--base` records (so that the indexes are not empty);
each round then ingests `--records` new records (a fresh namespace of the same generator, so
parents are earlier in the batch or stored) by each variant in turn, the order rotating: a raw
COPY into provenance as the owner (no side table, no row security), and append_records through
PostgresStore as the application role, `--batch` records an append (1000), every feature on
(signing, row security, root sources and postings, events, which queue the verifiable log). Each
append variant runs in a process of its own that imports `lineage` from its checkout
(`--before`: e.g. `git archive main | tar -x -C DIR`), and times every statement its
connections send: the report gives microseconds per record by statement and the rest (Python:
validation, canonical form, signing, encoding).

A second baseline COPYs every row an append writes for the same records (the records with their
root sources, their parent edges, their stream events, their postings by root source), as the
owner, into a database of its own: what the append's rows cost without SQL statements, row
security, signing or Python.
"""

import argparse
import asyncio
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
TENANT = "default"

# --- the worker: one variant's appends, in a process importing `lineage` from its checkout -----


def _timed_statements(totals: dict[str, float]) -> None:
    """Add the wall time of every statement any asyncpg connection sends to `totals`, by the
    named query's name (or the statement's first words)."""
    import asyncpg.connection

    from lineage.db.named_sql import QUERIES

    names = {query.sql: name for name, query in QUERIES.items()}

    def wrap(method_name: str) -> None:
        original = getattr(asyncpg.connection.Connection, method_name)

        async def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            first = args[0] if args and isinstance(args[0], str) else method_name
            name = names.get(first) or " ".join(first.split()[:2])
            started = time.perf_counter()
            try:
                return await original(self, *args, **kwargs)
            finally:
                totals[name] += time.perf_counter() - started

        setattr(asyncpg.connection.Connection, method_name, timed)

    for method_name in ("fetch", "execute", "fetchval", "fetchrow", "copy_records_to_table"):
        wrap(method_name)


async def _append(url: str, rows_file: str, batch: int) -> dict[str, Any]:
    from lineage.core.record import NewContext
    from lineage.db.database import Database
    from lineage.settings import Settings
    from lineage.store.postgres import PostgresStore

    proposals = [NewContext(**row) for row in _read_rows(rows_file)]
    database = await Database.connect(Settings(), url, min_size=1, max_size=1)
    totals: dict[str, float] = defaultdict(float)
    try:
        store = PostgresStore(database, TENANT)
        await store.append(proposals[:1])  # the pool's connection, the keyring, the partitions
        _timed_statements(totals)
        cpu_started, started = time.process_time(), time.perf_counter()
        for start in range(1, len(proposals), batch):
            await store.append(proposals[start : start + batch])
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
    finally:
        await database.close()
    count = len(proposals) - 1
    return {"records": count, "wall_s": wall, "cpu_s": cpu, "statements_s": dict(totals)}


def _read_rows(rows_file: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pickle.loads(Path(rows_file).read_bytes())
    return rows


def worker(arguments: argparse.Namespace) -> None:
    sys.path.insert(0, arguments.checkout)
    if arguments.rows is None:
        from lineage.db.migrate import migrate

        migrate(arguments.url)
        print("{}")
        return
    appended = _append(arguments.url, arguments.rows, arguments.batch)
    print(json.dumps(asyncio.run(appended)))


# --- the run ---------------------------------------------------------------------------------


def _proposal_rows(records: int, namespace: str) -> list[dict[str, Any]]:
    from bench.run import ingest_rows

    return [
        {
            "context_id": row[1],
            "parent_ids": list(row[2]),
            "kind": row[3],
            "source_uri": row[4],
            "content_hash": row[5],
            "transform": row[6],
            "transform_version": row[7],
            "produced_by": row[8],
            "index_snapshot": row[9],
            "trace_id": row[10],
            "attributes": json.loads(row[12]),
        }
        for row in ingest_rows(records, namespace, TENANT)
    ]


async def _copy(url: str, records: int, namespace: str) -> dict[str, Any]:
    import asyncpg

    from bench.dag import COLUMNS
    from bench.run import ingest_rows

    rows = ingest_rows(records, namespace, TENANT)
    owner = await asyncpg.connect(url)
    try:
        started = time.perf_counter()
        await owner.copy_records_to_table("provenance", records=rows, columns=COLUMNS)
        wall = time.perf_counter() - started
    finally:
        await owner.close()
    return {"records": len(rows), "wall_s": wall}


async def _copy_every_row(url: str, records: int, namespace: str, batch: int) -> dict[str, Any]:
    """A raw COPY of every row an append writes for its records, as the owner in one
    transaction: the records with their root sources (by number, migration 0038), the keys
    first numbered, their parent edges, their stream events, their postings by root source
    (grouped by append of `batch` records, as each append writes its own)."""
    import asyncpg

    from bench.dag import COLUMNS, Generator
    from bench.database import KeyNumbers, arrays, has_column, source_postings, split_uuid_ids
    from lineage.services.root_sources import SOURCE_KEY

    generated = list(Generator(records, TENANT, seed=namespace, namespace=namespace).rows())
    at = COLUMNS.index("created_at")
    edges = [(TENANT, parent, row[1], row[at], row[3]) for row, _ in generated for parent in row[2]]
    postings = [
        posting
        for start in range(0, len(generated), batch)
        for posting in source_postings(TENANT, generated[start : start + batch])
    ]
    owner = await asyncpg.connect(url)
    try:
        numbers = await KeyNumbers.stored(owner, TENANT)
        last = await owner.fetchval(
            "SELECT coalesce(max(position), 0) FROM events WHERE tenant_id = $1", TENANT
        )
        provenance_rows = []
        for row, roots in generated:
            sources, depths = arrays(roots)
            provenance_rows.append((*row, numbers.of(SOURCE_KEY + s for s in sources), depths))
        key_column = "key"
        if await has_column(owner, "invalidation_postings", "key_no"):  # migration 0047
            key_column = "key_no"
            postings = [(t, *numbers.of([key]), *rest) for t, key, *rest in postings]
        id_columns: tuple[str, ...] = ("context_ids",)
        if await has_column(owner, "invalidation_postings", "context_uuids"):  # migration 0048
            id_columns = ("context_uuids", "context_ids")
            postings = [(*rest, *split_uuid_ids(ids)) for *rest, ids in postings]
        started = time.perf_counter()
        async with owner.transaction():
            await owner.copy_records_to_table(
                "provenance",
                records=provenance_rows,
                columns=[*COLUMNS, "root_sources", "root_depths"],
            )
            await numbers.copy(owner)
            await owner.copy_records_to_table(
                "provenance_children",
                records=edges,
                columns=("tenant_id", "parent_id", "context_id", "created_at", "kind"),
            )
            await owner.copy_records_to_table(
                "events",
                records=[(TENANT, last + n, row[1]) for n, (row, _) in enumerate(generated, 1)],
                columns=("tenant_id", "position", "context_id"),
            )
            await owner.copy_records_to_table(
                "invalidation_postings",
                records=postings,
                columns=("tenant_id", key_column, "kind", "depth", "created_at", *id_columns),
            )
        wall = time.perf_counter() - started
    finally:
        await owner.close()
    return {"records": len(generated), "wall_s": wall}


def _in_checkout(checkout: str, *arguments: str) -> dict[str, Any]:
    """Run the worker in a process that imports `lineage` from `checkout`; its answer."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.ingest", "--worker", "--checkout", checkout, *arguments],
        cwd=HERE, check=True, capture_output=True, text=True,
        env={**os.environ, "LINEAGE_LOG_INTERVAL_S": "0"},
    )  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _run_variant(
    url: str, checkout: str, records: int, namespace: str, batch: int
) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".pickle", delete=False) as file:
        file.write(pickle.dumps(_proposal_rows(records + 1, namespace)))
    try:
        return _in_checkout(checkout, "--url", url, "--rows", file.name, "--batch", str(batch))
    finally:
        os.unlink(file.name)


async def _database(server_url: str, dbname: str, checkout: str, base: int) -> str:
    """A fresh database migrated by `checkout`'s migrations, holding the generated DAG."""
    from bench.database import load, recreate_empty

    url = await recreate_empty(server_url, dbname)
    _in_checkout(checkout, "--url", url)
    await load(url, base, TENANT)
    return url


def _load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def main(arguments: argparse.Namespace) -> dict[str, Any]:
    from bench.dag import parse_size
    from bench.database import drop
    from bench.run import machine

    # Each variant: the checkout whose append it runs.
    variants = {"batch append (this checkout)": str(HERE)}
    if arguments.before:
        variants["batch append (before)"] = arguments.before
    # Each variant appends into a database its own checkout's migrations made; the raw COPY
    # into this checkout's, the COPY of every row into one of its own (its root sources would
    # count as the append's).
    databases = {**variants, COPY_EVERY_ROW: str(HERE)}
    urls = {
        name: await _database(
            arguments.server, f"{arguments.dbname}_{index}", checkout, parse_size(arguments.base)
        )
        for index, (name, checkout) in enumerate(databases.items())
    }
    stored_before = {name: await _root_sources_stored(urls[name]) for name in variants}
    results: dict[str, list[dict[str, Any]]] = defaultdict(list)
    names = ["raw COPY", COPY_EVERY_ROW, *variants]
    try:
        for round_number in range(arguments.rounds):
            turn = round_number % len(names)
            for name in names[turn:] + names[:turn]:
                namespace = f"r{round_number}v{names.index(name)}"
                if name == "raw COPY":
                    url = urls["batch append (this checkout)"]
                    results[name].append(await _copy(url, arguments.records, namespace))
                elif name == COPY_EVERY_ROW:
                    url = urls[COPY_EVERY_ROW]
                    copied = await _copy_every_row(
                        url, arguments.records, namespace, arguments.batch
                    )
                    results[name].append(copied)
                else:
                    results[name].append(
                        _run_variant(
                            urls[name],
                            variants[name],
                            arguments.records,
                            namespace,
                            arguments.batch,
                        )
                    )
                print(f"round {round_number + 1} {name}: {results[name][-1]['wall_s']:.2f} s",
                      file=sys.stderr)  # fmt: skip
        load_average = _load_average()
        appended = arguments.records * arguments.rounds
        written = {
            name: _per_record(stored_before[name], await _root_sources_stored(urls[name]), appended)
            for name in variants
        }
    finally:
        for index in range(len(databases)):
            await drop(arguments.server, f"{arguments.dbname}_{index}")
    return {
        "command": " ".join(["python -m bench.ingest", *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load average (1, 5, 15 min)": load_average,
        **machine(),
        "summary": _summary(results),
        "root sources the rounds wrote, per record appended": written,
    }


COPY_EVERY_ROW = "raw COPY of every row an append writes"


# Root sources as each layout stores them: the side table root_sources before migration 0036
# (an earlier checkout's), since then each record's arrays and the postings under 'source:'.
SIDE_TABLE_ROWS = "SELECT count(*) FROM root_sources"
SOURCE_POSTINGS = (
    "SELECT count(*) FILTER (WHERE key LIKE 'source:%'), "
    "       coalesce(sum(pg_column_size(ip.*)) FILTER (WHERE key LIKE 'source:%'), 0), "
    "       coalesce(sum(pg_column_size(ip.*)), 0) "
    "FROM invalidation_postings AS ip"
)
# Since migration 0047 the postings name their key by number.
NUMBERED_SOURCE_POSTINGS = SOURCE_POSTINGS.replace("key LIKE", "k.key LIKE") + (
    " JOIN invalidation_keys AS k ON k.tenant_id = ip.tenant_id AND k.key_no = ip.key_no"
)
RECORD_ARRAYS = (
    "SELECT coalesce(sum(pg_column_size(root_sources) + pg_column_size(root_depths)), 0) "
    "FROM provenance"
)


async def _root_sources_stored(url: str) -> dict[str, int]:
    """What the database holds for root sources, in whichever layout its schema has."""
    import asyncpg

    from bench.database import has_column
    from bench.features import table_bytes

    owner = await asyncpg.connect(url)
    try:
        if await owner.fetchval("SELECT to_regclass('root_sources') IS NOT NULL"):
            return {
                "root_sources rows": await owner.fetchval(SIDE_TABLE_ROWS),
                "root_sources bytes (with indexes)": await table_bytes(owner, "root_sources"),
            }
        numbered = await has_column(owner, "invalidation_postings", "key_no")
        query = NUMBERED_SOURCE_POSTINGS if numbered else SOURCE_POSTINGS
        rows, source_bytes, all_bytes = await owner.fetchrow(query)
        postings_bytes = await table_bytes(owner, "invalidation_postings")
        return {
            "'source:' postings rows": rows,
            # The table holds the postings by invalidation key too: the sources' share of it.
            "'source:' postings bytes (share of invalidation_postings with indexes)": round(
                postings_bytes * source_bytes / all_bytes
            )
            if all_bytes
            else 0,
            "provenance root_sources and root_depths bytes": await owner.fetchval(RECORD_ARRAYS),
        }
    finally:
        await owner.close()


def _per_record(before: dict[str, int], after: dict[str, int], records: int) -> dict[str, float]:
    """What the rounds added, per record appended."""
    return {
        name: round((after[name] - before[name]) / records, 2 if name.endswith("rows") else None)
        for name in after
    }


def _summary(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per variant: records/s over all rounds, and microseconds per record by statement."""
    copy_rate = _rate(results["raw COPY"])
    every_row_rate = _rate(results[COPY_EVERY_ROW])
    summary: dict[str, Any] = {}
    for name, runs in results.items():
        rate = _rate(runs)
        entry: dict[str, Any] = {
            "records_per_s": round(rate),
            "of_raw_copy": f"{rate / copy_rate:.0%}",
            "of_raw_copy_of_every_row": f"{rate / every_row_rate:.0%}",
        }
        if "statements_s" in runs[0]:
            records = sum(run["records"] for run in runs)
            parts: dict[str, float] = defaultdict(float)
            for run in runs:
                for statement, seconds in run["statements_s"].items():
                    parts[statement] += seconds
            wall = sum(run["wall_s"] for run in runs)
            per_record = {k: round(v / records * 1e6, 1) for k, v in sorted(parts.items())}
            rest = wall - sum(parts.values())
            per_record["(the rest: Python)"] = round(rest / records * 1e6, 1)
            per_record["(of which process CPU)"] = round(
                sum(run["cpu_s"] for run in runs) / records * 1e6, 1
            )
            entry["us_per_record"] = {"total": round(wall / records * 1e6, 1), **per_record}
        summary[name] = entry
    return summary


def _rate(runs: list[dict[str, Any]]) -> float:
    return float(sum(run["records"] for run in runs) / sum(run["wall_s"] for run in runs))


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--dbname", default="lineage_bench_ingest")
    parser.add_argument("--base", default="100k", help="records in the DAG before the rounds")
    parser.add_argument("--records", type=int, default=10_000, help="per variant and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1000, help="records an append")
    parser.add_argument(
        "--before",
        type=lambda path: str(Path(path).resolve()),
        help="an earlier checkout whose append to time beside this one's",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--rows", help=argparse.SUPPRESS)
    parser.add_argument("--checkout", help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    parsed = parse_arguments()
    if parsed.worker:
        worker(parsed)
    else:
        print(json.dumps(asyncio.run(main(parsed)), indent=2))
