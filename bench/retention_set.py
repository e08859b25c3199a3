"""How long `lineage retention set` makes appends wait while it closes the open partition.

    python -m bench.retention_set --size 100k --server-url postgresql://postgres@127.0.0.1:5432/postgres

Loads the synthetic DAG (bench/dag.py) twice at the head with no period, then on each in turn,
while a second connection appends 10 records a batch without pause, sets a one-month period:
- one transaction: the policy and lineage_partitions_shape together, as `retention set` did
  before migration 0024, the ATTACH reading every row of the open partition with appends waiting;
- retention.set_policy: the check NOT VALID, its validation and the close, each committed alone.
The set's duration, the longest append under way while it ran (the wait), the median append of
the run and how many appends ran during the set, for each.
"""

import argparse
import asyncio
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from bench.dag import parse_size
from bench.database import drop, load, recreate
from bench.run import ingest_rows, proposals
from lineage import db
from lineage.db.database import Database
from lineage.services import retention
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore

DBNAME = "lineage_bench_retention_set"
BATCH = 10


@dataclass
class Wait:
    variant: str
    set_s: float
    longest_append_ms: float
    median_append_ms: float
    appends: int


async def _one_transaction(owner: Database) -> None:
    async with owner.connection() as connection, connection.transaction():
        await db.fetch(connection, "retention_policy_set", keep_months=1)
        await db.fetch(connection, "partitions_shape", now=datetime.now(UTC))


async def _set_policy(owner: Database) -> None:
    await retention.set_policy(owner, 1)


async def measure_one(url: str, variant: str, namespace: str) -> Wait:
    owner = await Database.connect(Settings(), url, max_size=2, as_owner=True)
    app = await Database.connect(Settings(), url, max_size=2)
    batches = proposals(ingest_rows(20_000, namespace, "default"))
    store = PostgresStore(app, "default")
    spans: list[tuple[float, float]] = []
    setting = True

    async def append() -> None:
        for start in range(0, len(batches), BATCH):
            began = time.perf_counter()
            await store.append(batches[start : start + BATCH])
            spans.append((began, time.perf_counter()))
            if not setting:
                return

    try:
        appending = asyncio.create_task(append())
        await asyncio.sleep(1.0)  # appends under way before the set begins
        began = time.perf_counter()
        await (_one_transaction if variant == "one transaction" else _set_policy)(owner)
        ended = time.perf_counter()
        setting = False
        await appending
    finally:
        await app.close()
        await owner.close()
    during = [(end - start) * 1000 for start, end in spans if end > began and start < ended]
    taken = [(end - start) * 1000 for start, end in spans]
    return Wait(variant, ended - began, max(during), statistics.median(taken), len(during))


async def measure(records: int, server_url: str) -> tuple[int, list[Wait]]:
    variants = ("one transaction", "retention.set_policy")
    names = [f"{DBNAME}_{number}" for number in range(len(variants))]
    try:
        urls = [await recreate(server_url, name) for name in names]
        for url in urls:
            await load(url, records)
            owner = await Database.connect(Settings(), url, max_size=1, as_owner=True)
            try:  # autovacuum on the loaded rows would hold the set's first lock for a second
                await owner.pool.execute("VACUUM ANALYZE")
            finally:
                await owner.close()
        owner = await Database.connect(Settings(), urls[0], max_size=1, as_owner=True)
        try:
            loaded = await owner.pool.fetchval("SELECT count(*) FROM provenance")
        finally:
            await owner.close()
        waits = [
            await measure_one(url, variant, f"set_{number}")
            for number, (url, variant) in enumerate(zip(urls, variants, strict=True))
        ]
        return loaded, waits
    finally:
        for name in names:
            await drop(server_url, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="100k", help="100k, 1M or a number of records")
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    arguments = parser.parse_args()
    loaded, waits = asyncio.run(measure(parse_size(arguments.size), arguments.server_url))
    print(f"{loaded:,} records in the open partition; appends of {BATCH} records")
    print("| variant | set | longest append during it | median append | appends during it |")
    print("| --- | --- | --- | --- | --- |")
    for w in waits:
        print(f"| {w.variant} | {w.set_s:.2f} s | {w.longest_append_ms:,.0f} ms "
              f"| {w.median_append_ms:,.1f} ms | {w.appends} |")  # fmt: skip


if __name__ == "__main__":
    main()
