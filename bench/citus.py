"""Citus against plain PostgreSQL on the same data: walk-back and typical blast radius (p50/p99,
and Citus's over plain's), and batch ingest of two tenants at once.

    python -m bench.citus --records 50000

Two tenants, each holding the benchmark's synthetic RAG DAG (bench/dag.py) of `--records`
records, loaded by bench/database.py into a private PostgreSQL 15 and into a private Citus
12 cluster (a coordinator and two workers, tests/citus_cluster.py; the same binaries and
settings), placed by `lineage distribute`. Then, on each, as the application role in a tenant
transaction (row security on, JIT off, as the service runs them):

- walk-back of an answer: sql/walk_back.sql for `--samples` answers of the first tenant;
- typical blast radius: sql/blast_radius_ids_by_source.sql, kind answer, for typical documents;
- batch ingest: two writers at once, one per tenant, each `--ingest` records through
  append_records, 1000 a batch. On Citus the two tenants are ones whose shards are on
  different workers; on plain PostgreSQL both go to the one server.

Needs Citus built into /usr/lib/postgresql/15 (.ci/run builds it); prints JSON.
"""

import argparse
import asyncio
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import asyncpg
import psycopg

from bench.dag import Picks
from bench.database import load, url_for
from bench.figures import percentile
from bench.run import ingest_rows, milliseconds_since, proposals, timed
from lineage import db
from lineage.db.database import Database
from lineage.db.distribute import distribute
from lineage.db.migrate import migrate
from lineage.services import auth
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.citus_cluster import (
    CITUS_SETTINGS,
    PG15_BIN,
    CitusCluster,
    citus_cluster,
    tenant_port,
)
from tests.private_postgres import PrivatePostgres

TENANTS = ("default", "acme")
BATCH = 1000


@dataclass
class Measured:
    walk_back_ms: list[float] = field(default_factory=list)
    blast_radius_ms: list[float] = field(default_factory=list)
    answers_per_document: list[int] = field(default_factory=list)
    ingest_records_per_s: float = 0.0
    load_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "walk_back_ms": _p50_p99(self.walk_back_ms),
            "blast_radius_ms": _p50_p99(self.blast_radius_ms),
            "answers_per_typical_document_p50": percentile(
                [float(n) for n in self.answers_per_document], 0.5
            ),
            "ingest_two_tenants_records_per_s": round(self.ingest_records_per_s),
            "load_s": round(self.load_s, 1),
        }


def _p50_p99(samples: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(samples, 0.5), 2),
        "p99": round(percentile(samples, 0.99), 2),
        "samples": len(samples),
    }


async def load_tenants(url: str, records: int) -> Picks:
    """The DAG in each tenant (the picks of the first); the tenants of the ingest made."""
    picks = None
    for tenant in TENANTS:
        found, _ = await load(url, records, tenant)
        picks = picks or found
    assert picks is not None
    return picks


async def _read(pool: asyncpg.Pool, tenant: str, name: str, values: dict[str, Any]) -> int:
    async with db.transaction(pool, tenant, statement_timeout_ms=120_000) as connection:
        return len(await db.fetch(connection, name, tenant_id=tenant, **values))


async def measure_reads(url: str, picks: Picks, samples: int, into: Measured) -> None:
    tenant = TENANTS[0]
    answers = picks.answer_ids[:samples]
    documents = picks.typical_source_uris[: max(2, samples // 5)]
    warmup = min(20, len(answers) // 4)
    pool = await db.create_pool(url, min_size=1, max_size=2)
    try:

        def walk(answer: str) -> Callable[[], Any]:
            values = {"context_id": answer, "max_depth": 20}
            return partial(_read, pool, tenant, "walk_back", values)

        def radius(source_uri: str) -> Callable[[], Any]:
            values = {"source_uri": source_uri, "kind": "answer", "max_depth": 20}
            return partial(_read, pool, tenant, "blast_radius_ids_by_source", values)

        for answer in answers:  # untimed: both servers start from a warm cache
            await walk(answer)()
        into.walk_back_ms = await timed((walk(a) for a in answers), warmup)
        for source_uri in documents:
            into.answers_per_document.append(await radius(source_uri)())
        into.blast_radius_ms = await timed(
            (radius(u) for u in documents), min(2, len(documents) // 4)
        )
    finally:
        await pool.close()


async def measure_ingest(url: str, tenants: tuple[str, str], records: int, into: Measured) -> None:
    """Two writers at once, one per tenant, each `records` through append_records."""
    pool = await db.create_pool(url, min_size=2, max_size=2)
    try:
        batches = {
            tenant: proposals(ingest_rows(records, f"ingest_{tenant}", tenant))
            for tenant in tenants
        }

        async def writer(tenant: str) -> None:
            store = PostgresStore(Database(pool, Settings()), tenant)
            rows = batches[tenant]
            for start in range(0, len(rows), BATCH):
                await store.append(rows[start : start + BATCH])

        started = time.perf_counter()
        await asyncio.gather(*(writer(tenant) for tenant in tenants))
        into.ingest_records_per_s = 2 * records / (milliseconds_since(started) / 1000)
    finally:
        await pool.close()


async def create_tenants(url: str, tenants: tuple[str, ...]) -> None:
    owner = await db.create_pool(url, max_size=1, as_owner=True)
    try:
        for tenant in tenants:
            await auth.create_tenant(Database(owner, Settings()), tenant)
    finally:
        await owner.close()


def tenants_on_two_workers(url: str) -> tuple[str, str]:
    """Two tenant ids whose shards (of provenance, and so of every colocated table) are on
    different workers."""
    by_port: dict[int, str] = {}
    with psycopg.connect(url) as coordinator:
        for number in range(1000):
            name = f"ingest_{number}"
            by_port.setdefault(tenant_port(coordinator, name), name)
            if len(by_port) == 2:
                first, second = by_port.values()
                return first, second
    raise RuntimeError("no two tenants found on different workers")


async def measure_backend(
    url: str, records: int, samples: int, ingest: int, citus: bool
) -> Measured:
    measured = Measured()
    started = time.perf_counter()
    picks = await load_tenants(url, records)
    measured.load_s = time.perf_counter() - started
    await measure_reads(url, picks, samples, measured)
    ingest_tenants = tenants_on_two_workers(url) if citus else ("ingest_a", "ingest_b")
    await create_tenants(url, ingest_tenants)
    await measure_ingest(url, ingest_tenants, ingest, measured)
    return measured


@contextmanager
def private_servers() -> Iterator[tuple[str, CitusCluster]]:
    """A plain PostgreSQL 15 with the Citus nodes' settings but Citus, and a Citus cluster."""
    with ExitStack() as stack:
        plain_settings = {
            k: v for k, v in CITUS_SETTINGS.items() if k != "shared_preload_libraries"
        }
        plain = PrivatePostgres(bin_dir=PG15_BIN, settings=plain_settings)
        stack.callback(plain.destroy)
        plain.start()
        cluster = stack.enter_context(citus_cluster())
        yield plain.url, cluster


async def compare(
    plain_server: str, cluster: CitusCluster, records: int, samples: int, ingest: int, dbname: str
) -> dict[str, Any]:
    """Load, time and compare on both; returns the figures (JSON-ready)."""
    connection = await asyncpg.connect(plain_server)
    try:
        await connection.execute(f'CREATE DATABASE "{dbname}"')
    finally:
        await connection.close()
    plain_url = url_for(plain_server, dbname)
    migrate(plain_url)
    citus_url = cluster.create_database(dbname)
    migrate(citus_url)
    distribute(citus_url)
    on_plain = await measure_backend(plain_url, records, samples, ingest, citus=False)
    on_citus = await measure_backend(citus_url, records, samples, ingest, citus=True)
    plain, distributed = on_plain.summary(), on_citus.summary()
    ratios = {
        f"{figure}_{point}": round(distributed[figure][point] / plain[figure][point], 2)
        for figure in ("walk_back_ms", "blast_radius_ms")
        for point in ("p50", "p99")
    }
    ratios["ingest"] = round(
        distributed["ingest_two_tenants_records_per_s"] / plain["ingest_two_tenants_records_per_s"],
        2,
    )
    return {
        "records_per_tenant": records,
        "tenants": len(TENANTS),
        "load_average": os.getloadavg(),
        "plain_postgresql": plain,
        "citus": distributed,
        "citus_over_plain": ratios,
    }


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000, help="records per tenant")
    parser.add_argument("--samples", type=int, default=200, help="answers walked back")
    parser.add_argument("--ingest", type=int, default=10_000, help="records per ingest writer")
    return parser.parse_args()


async def main(arguments: argparse.Namespace) -> dict[str, Any]:
    with private_servers() as (plain_server, cluster):
        return await compare(
            plain_server, cluster, arguments.records, arguments.samples, arguments.ingest,
            "lineage_bench_citus",
        )  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(parse_arguments())), indent=2))
