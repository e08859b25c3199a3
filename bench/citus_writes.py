"""Appends on Citus against plain PostgreSQL, on one machine: throughput, small-batch latency,
and the CPU each server spends per appended record.

    python -m bench.citus_writes
    python -m bench.citus_writes --records 500 --rounds 1 --seconds 3   # a quick check

A private Citus 12 cluster (a coordinator and two workers, tests/citus_cluster.py, default
Citus settings) with the schema migrated and placed by `lineage distribute`, and a private plain
PostgreSQL 15 (tests/private_postgres.py, the same binaries and settings but Citus). Each append
is `append_records` in a tenant transaction (`Database.tenant`), as the service appends; on
Citus that is one call of `lineage_append` delegated to the tenant's worker.

1. Ingest: 4 tenants appending at once, one writer each, `--records` generated records per
   tenant (bench/dag.py's DAG: records with parents), 1000 a batch; on Citus the 4 tenants
   are chosen so that 2 live on each worker. `--rounds` rounds, Citus and plain interleaved
   (the order alternating), each round new records; records/s per round, Citus/plain per round
   and the medians.
2. Small batches: 8 writers, each its own tenant (4 on each worker on Citus), appending batches
   of 10 records (a document and 9 chunks, parents in the batch and in the writer's previous
   batch) for `--seconds` seconds; records/s and each batch's latency (the tenant transaction,
   open to commit) p50/p99. `--small-rounds` rounds, interleaved like (1).
3. CPU: around each timed phase, the utime+stime of each server's postmaster and every process
   under it (plus the postmaster's cutime+cstime: backends that exited meanwhile), read from
   /proc, and the client's own process_time: microseconds of CPU per appended record for the
   plain server, the coordinator and each worker. From the ingest figures, a projection of
   ingest on 2, 4 and 8 workers, each node on a machine of its own with this machine's cores:
   records/s <= min(cores / coordinator CPU per record, workers * cores / worker CPU per
   record), where the worker CPU per record is what the workers together spent per record
   (each record is written on one worker) and the coordinator's is spent for every record
   whichever worker holds it. Server nodes only: the client's CPU is reported, not projected.

Beside them, untimed: the sessions each node opened on the database during the phases
(pg_stat_database), and, for one append of 10 and one of 1000 records on Citus, the commands the
coordinator issued to the worker and the statements the worker ran by local execution
(citus.log_remote_commands).

Needs Citus built into /usr/lib/postgresql/15 (.ci/run builds it); prints JSON.
"""

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import psycopg

from bench.citus import create_tenants
from bench.database import url_for
from bench.figures import percentile
from bench.run import ingest_rows, proposals
from lineage import db
from lineage.core.record import NewContext
from lineage.db import set_tenant_sql
from lineage.db.database import Database, Transaction
from lineage.db.distribute import distribute
from lineage.db.migrate import migrate
from lineage.services.appends import append_records
from lineage.settings import Settings
from tests.citus_cluster import (
    CITUS_SETTINGS,
    PG15_BIN,
    CitusCluster,
    citus_cluster,
    tenant_port,
)
from tests.private_postgres import PrivatePostgres

DBNAME = "lineage_bench_citus_writes"
BATCH = 1000
SMALL_BATCH = 10
INGEST_TENANTS_PER_WORKER = 2  # 4 tenants on 2 workers
SMALL_TENANTS_PER_WORKER = 4  # 8 writers on 2 workers
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PROJECTED_WORKERS = (2, 4, 8)


# --- CPU of a server's process tree, from /proc ---------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3 on), or None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rpartition(")")[2].split()


def _parents() -> dict[int, int]:
    """Every process's parent."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                found[int(entry.name)] = int(fields[1])
    return found


def postmaster_pid(server: PrivatePostgres) -> int:
    """The first line of the data folder's postmaster.pid."""
    return int((server.pgdata / "postmaster.pid").read_text().split()[0])


def tree_cpu_s(postmaster: int) -> float:
    """CPU seconds of the postmaster and all its descendants (utime+stime of each), plus the
    postmaster's cutime+cstime (the children it reaped: backends that exited)."""
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    ticks = 0
    stack = [postmaster]
    while stack:
        pid = stack.pop()
        fields = _stat_fields(pid)
        if fields is None:
            continue  # exited meanwhile: counted in its parent's cutime once reaped
        # After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
        ticks += int(fields[11]) + int(fields[12])
        if pid == postmaster:
            ticks += int(fields[13]) + int(fields[14])
        stack.extend(children.get(pid, ()))
    return ticks / CLOCK_TICKS


# --- the two backends ---------------------------------------------------------------------


@dataclass
class Backend:
    name: str  # "plain" or "citus"
    url: str
    nodes: dict[str, PrivatePostgres]  # by node name: plain, or coordinator, worker_1, ...
    database: Database | None = None

    def cpu(self) -> dict[str, float]:
        return {node: tree_cpu_s(postmaster_pid(server)) for node, server in self.nodes.items()}

    def sessions(self) -> dict[str, int]:
        """Sessions each node has opened on the bench's database so far (pg_stat_database,
        read from another database): the client's, and on Citus the coordinator's to the
        workers."""
        counts = {}
        for node, server in self.nodes.items():
            with psycopg.connect(server.url) as admin:
                row = admin.execute(
                    "SELECT sessions FROM pg_stat_database WHERE datname = %s", (DBNAME,)
                ).fetchone()
            counts[node] = int(row[0]) if row else 0
        return counts

    @property
    def db(self) -> Database:
        assert self.database is not None
        return self.database


@dataclass
class Phase:
    """One timed phase on one backend: records, seconds, CPU seconds by node and the client's."""

    records: int = 0
    seconds: float = 0.0
    cpu_s: dict[str, float] = field(default_factory=dict)
    sessions: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    batch_ms: list[float] = field(default_factory=list)

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds


async def timed_phase(backend: Backend, work: Callable[[Phase], Awaitable[None]]) -> Phase:
    """Run `work`, counting the wall time and each node's and the client's CPU around it."""
    phase = Phase()
    sessions = backend.sessions()
    before = backend.cpu()
    client = time.process_time()
    started = time.perf_counter()
    await work(phase)
    phase.seconds = time.perf_counter() - started
    client_s = time.process_time() - client
    after = backend.cpu()
    phase.cpu_s = {node: after[node] - before[node] for node in before}
    phase.cpu_s["client"] = client_s
    await asyncio.sleep(1.5)  # a backend flushes its counts to pg_stat_database within a second
    phase.sessions = {n: count - sessions[n] for n, count in backend.sessions().items()}
    return phase


async def append(database: Database, tenant: str, batch: Sequence[NewContext]) -> None:
    async with database.tenant(tenant) as tx:
        await append_records(tx, batch)


# --- 1. ingest: 4 tenants at once, 1000 a batch ----------------------------------------------


def ingest_batches(tenants: Sequence[str], records: int, round_: int) -> dict[str, list[Any]]:
    """Each tenant's new generated records for one round (the same for both backends)."""
    return {
        tenant: proposals(ingest_rows(records, f"r{round_}_{tenant}", tenant)) for tenant in tenants
    }


async def ingest(backend: Backend, batches: dict[str, list[NewContext]]) -> Phase:
    async def work(phase: Phase) -> None:
        async def writer(tenant: str) -> None:
            rows = batches[tenant]
            for start in range(0, len(rows), BATCH):
                await append(backend.db, tenant, rows[start : start + BATCH])

        await asyncio.gather(*(writer(tenant) for tenant in batches))
        phase.records = sum(len(rows) for rows in batches.values())
        phase.batches = sum(-(-len(rows) // BATCH) for rows in batches.values())

    return await timed_phase(backend, work)


# --- 2. small batches: 8 writers, 10 records a batch, for a fixed time ---------------------


def small_batch(writer: str, number: int) -> list[NewContext]:
    """A document and 9 chunks: the odd chunks of this batch's document, the even ones of the
    writer's previous batch's document (stored), the first batch's all of its own."""
    document = f"{writer}_doc_{number}"
    previous = f"{writer}_doc_{number - 1}" if number > 0 else document
    batch = [
        NewContext(
            context_id=document,
            kind="document",
            source_uri=f"s3://bench/{writer}/{number}.md",
            content_hash=f"sha256:{number:064x}",
        )
    ]
    batch.extend(
        NewContext(
            context_id=f"{document}_chunk_{chunk}",
            kind="chunk",
            parent_ids=[document if chunk % 2 else previous],
            content_hash=f"sha256:{number * 16 + chunk + 1:064x}",
            transform="chunker",
            transform_version="chunker@2",
        )
        for chunk in range(SMALL_BATCH - 1)
    )
    return batch


async def small_batches(
    backend: Backend, tenants: Sequence[str], seconds: float, tag: str
) -> Phase:
    async def work(phase: Phase) -> None:
        deadline = time.perf_counter() + seconds

        async def writer(tenant: str) -> None:
            number = 0
            while time.perf_counter() < deadline:
                batch = small_batch(f"{tag}_{tenant}", number)
                started = time.perf_counter()
                await append(backend.db, tenant, batch)
                phase.batch_ms.append((time.perf_counter() - started) * 1000)
                phase.records += len(batch)
                phase.batches += 1
                number += 1

        await asyncio.gather(*(writer(tenant) for tenant in tenants))

    return await timed_phase(backend, work)


# --- what the coordinator sends for one append (untimed) ----------------------------------


async def citus_commands(backend: Backend, tenant: str, batch: Sequence[NewContext]) -> Any:
    """The commands the coordinator issues to workers for one append, and those the worker
    reports running by local execution (citus.log_remote_commands, in the append's own
    transaction)."""
    messages: list[str] = []

    def listen(_: Any, message: Any) -> None:
        messages.append(message.message)

    # As Database.tenant opens a tenant transaction, listening until after its COMMIT.
    async with backend.db.pool.acquire() as connection:
        connection.add_log_listener(listen)
        try:
            async with connection.transaction():
                await connection.execute(
                    set_tenant_sql(tenant, getattr(connection, "vouching_key", None))
                    + "; SET LOCAL citus.log_remote_commands = on"
                    + "; SET LOCAL client_min_messages = log"
                )
                await append_records(Transaction(backend.db, connection, tenant), batch)
        finally:
            connection.remove_log_listener(listen)
    lines = [" ".join(message.split())[:110] for message in messages]
    return {
        "issued_to_workers": sum(line.startswith("issuing") for line in lines),
        "executed_locally_on_the_worker": sum(line.startswith("executing") for line in lines),
        "log": lines,
    }


# --- set-up --------------------------------------------------------------------------------


def tenants_by_worker(url: str, per_worker: int, prefix: str) -> dict[str, int]:
    """`per_worker` tenant ids on each worker (id -> the worker's port), by where Citus hashes
    each id's shard of provenance (and so of every colocated table)."""
    chosen: dict[str, int] = {}
    counts: dict[int, int] = {}
    with psycopg.connect(url) as coordinator:
        workers = coordinator.execute(
            "SELECT count(*) FROM citus_get_active_worker_nodes()"
        ).fetchone()
        assert workers is not None
        for number in range(10_000):
            name = f"{prefix}_{number}"
            port = tenant_port(coordinator, name)
            if counts.get(port, 0) < per_worker:
                counts[port] = counts.get(port, 0) + 1
                chosen[name] = port
            if len(chosen) == per_worker * workers[0]:
                return chosen
    raise RuntimeError("not enough tenants found on each worker")


def server_facts(url: str, citus: bool) -> dict[str, Any]:
    with psycopg.connect(url) as connection:
        version = connection.execute("SHOW server_version").fetchone()
        facts: dict[str, Any] = {"server_version": version[0] if version else None}
        if citus:
            for name in (
                "citus.max_cached_conns_per_worker",
                "citus.max_adaptive_executor_pool_size",
                "citus.max_shared_pool_size",
                "citus.shard_count",
            ):
                row = connection.execute(f"SHOW {name}").fetchone()
                facts[name] = row[0] if row else None
            row = connection.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'citus'"
            ).fetchone()
            facts["citus_version"] = row[0] if row else None
    return facts


async def prepare(plain_server: PrivatePostgres, cluster: CitusCluster) -> tuple[Backend, Backend]:
    connection = await asyncpg.connect(plain_server.url)
    try:
        await connection.execute(f'CREATE DATABASE "{DBNAME}"')
    finally:
        await connection.close()
    plain_url = url_for(plain_server.url, DBNAME)
    migrate(plain_url)
    citus_url = cluster.create_database(DBNAME)
    migrate(citus_url)
    distribute(citus_url)
    citus_nodes = {"coordinator": cluster.coordinator}
    for number, worker in enumerate(cluster.workers, 1):
        citus_nodes[f"worker_{number}"] = worker
    plain = Backend("plain", plain_url, {"plain": plain_server})
    return plain, Backend("citus", citus_url, citus_nodes)


async def open_databases(backends: Sequence[Backend], writers: int) -> None:
    for backend in backends:
        pool = await db.create_pool(backend.url, min_size=writers, max_size=writers)
        backend.database = Database(pool, Settings())


async def close_databases(backends: Sequence[Backend]) -> None:
    for backend in backends:
        if backend.database is not None:
            await backend.database.pool.close()


# --- the report ----------------------------------------------------------------------------


def _ms(samples: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(samples, 0.5), 2),
        "p99": round(percentile(samples, 0.99), 2),
        "samples": len(samples),
    }


def cpu_us_per_record(phases: Sequence[Phase]) -> dict[str, float]:
    """Each node's (and the client's) CPU over all the phases, per record they appended."""
    records = sum(phase.records for phase in phases)
    nodes = phases[0].cpu_s.keys()
    per_record = {
        node: sum(phase.cpu_s[node] for phase in phases) * 1e6 / records for node in nodes
    }
    workers = [node for node in nodes if node.startswith("worker_")]
    if workers:
        per_record["workers_total"] = sum(per_record[node] for node in workers)
    return {node: round(us, 1) for node, us in per_record.items()}


def sessions_opened(phases: Sequence[Phase]) -> dict[str, Any]:
    """Sessions each node opened on the database over all the phases, and per batch."""
    batches = sum(phase.batches for phase in phases)
    opened = {node: sum(phase.sessions[node] for phase in phases) for node in phases[0].sessions}
    return {
        "batches": batches,
        "sessions": opened,
        "sessions_per_batch": {node: round(n / batches, 3) for node, n in opened.items()},
    }


def projection(citus_cpu: dict[str, float], plain_cpu: dict[str, float], cores: int) -> Any:
    coordinator_bound = cores * 1e6 / citus_cpu["coordinator"]
    rows = {}
    for workers in PROJECTED_WORKERS:
        worker_bound = workers * cores * 1e6 / citus_cpu["workers_total"]
        rows[str(workers)] = {
            "coordinator_bound_records_per_s": round(coordinator_bound),
            "workers_bound_records_per_s": round(worker_bound),
            "records_per_s": round(min(coordinator_bound, worker_bound)),
            "bound_by": "coordinator" if coordinator_bound <= worker_bound else "workers",
        }
    return {
        "formula": (
            "records/s <= min(cores * 1e6 / coordinator_us_per_record, "
            "workers * cores * 1e6 / workers_total_us_per_record); server nodes only"
        ),
        "cores_per_node": cores,
        "workers": rows,
        "plain_one_server_records_per_s": round(cores * 1e6 / plain_cpu["plain"]),
    }


def report(
    arguments: argparse.Namespace,
    ingest_phases: dict[str, list[Phase]],
    small_phases: dict[str, list[Phase]],
    facts: dict[str, Any],
) -> dict[str, Any]:
    rounds = [
        {
            "plain_records_per_s": round(plain.records_per_s),
            "citus_records_per_s": round(citus.records_per_s),
            "citus_over_plain": round(citus.records_per_s / plain.records_per_s, 2),
        }
        for plain, citus in zip(ingest_phases["plain"], ingest_phases["citus"], strict=True)
    ]
    median_plain = statistics.median(p.records_per_s for p in ingest_phases["plain"])
    median_citus = statistics.median(p.records_per_s for p in ingest_phases["citus"])
    small: dict[str, Any] = {}
    for name, phases in small_phases.items():
        samples = [ms for phase in phases for ms in phase.batch_ms]
        small[name] = {
            "records_per_s_by_round": [round(p.records_per_s) for p in phases],
            "records_per_s_median": round(statistics.median(p.records_per_s for p in phases)),
            "batch_ms": _ms(samples),
        }
    small["citus_over_plain_records_per_s"] = round(
        statistics.median(p.records_per_s for p in small_phases["citus"])
        / statistics.median(p.records_per_s for p in small_phases["plain"]),
        2,
    )
    ingest_cpu = {name: cpu_us_per_record(phases) for name, phases in ingest_phases.items()}
    small_cpu = {name: cpu_us_per_record(phases) for name, phases in small_phases.items()}
    sessions = {
        figure: {name: sessions_opened(phases) for name, phases in by_backend.items()}
        for figure, by_backend in (
            ("ingest_4_tenants", ingest_phases),
            ("small_batches_8_writers", small_phases),
        )
    }
    cores = os.cpu_count() or 1
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "nproc": cores,
        "sizes": {
            "ingest_records_per_tenant_per_round": arguments.records,
            "ingest_rounds": arguments.rounds,
            "ingest_batch": BATCH,
            "small_batch": SMALL_BATCH,
            "small_writers": 2 * SMALL_TENANTS_PER_WORKER,
            "small_seconds": arguments.seconds,
            "small_rounds": arguments.small_rounds,
        },
        **facts,
        "ingest_4_tenants": {
            "rounds": rounds,
            "records_per_round": ingest_phases["plain"][0].records,
            "plain_records_per_s_median": round(median_plain),
            "citus_records_per_s_median": round(median_citus),
            "citus_over_plain_of_medians": round(median_citus / median_plain, 2),
            "citus_over_plain_median_of_rounds": round(
                statistics.median(r["citus_over_plain"] for r in rounds), 2
            ),
        },
        "small_batches_8_writers": small,
        "cpu_us_per_record": {"ingest_4_tenants": ingest_cpu, "small_batches_8_writers": small_cpu},
        "sessions_opened": sessions,
        "projection_from_ingest": projection(ingest_cpu["citus"], ingest_cpu["plain"], cores),
    }


# --- the run -------------------------------------------------------------------------------


async def run(
    arguments: argparse.Namespace, plain_server: PrivatePostgres, cluster: CitusCluster
) -> dict[str, Any]:
    plain, citus = await prepare(plain_server, cluster)
    backends = (plain, citus)
    ingest_placed = tenants_by_worker(citus.url, INGEST_TENANTS_PER_WORKER, "ingest")
    small_placed = tenants_by_worker(citus.url, SMALL_TENANTS_PER_WORKER, "small")
    for backend in backends:
        await create_tenants(backend.url, (*ingest_placed, *small_placed))
    facts: dict[str, Any] = {
        "load_average_start": os.getloadavg(),
        "plain": server_facts(plain.url, citus=False),
        "citus": server_facts(citus.url, citus=True),
        "worker_ports": {f"worker_{n}": worker.port for n, worker in enumerate(cluster.workers, 1)},
        "ingest_tenants": ingest_placed,
        "small_tenants": small_placed,
    }
    await open_databases(backends, len(small_placed))
    try:
        # Untimed: each tenant's first appends (plans, partitions, Citus's worker connections).
        warm = ingest_batches((*ingest_placed, *small_placed), 200, -1)
        for backend in backends:
            await asyncio.gather(*(append(backend.db, t, rows) for t, rows in warm.items()))
        ingest_phases: dict[str, list[Phase]] = {"plain": [], "citus": []}
        for round_ in range(arguments.rounds):
            batches = ingest_batches(tuple(ingest_placed), arguments.records, round_)
            for backend in backends if round_ % 2 == 0 else backends[::-1]:
                ingest_phases[backend.name].append(await ingest(backend, batches))
        small_phases: dict[str, list[Phase]] = {"plain": [], "citus": []}
        for round_ in range(arguments.small_rounds):
            for backend in backends[::-1] if round_ % 2 == 0 else backends:
                small_phases[backend.name].append(
                    await small_batches(
                        backend, tuple(small_placed), arguments.seconds, f"s{round_}"
                    )
                )
        facts["load_average_end"] = os.getloadavg()
        probe = next(iter(small_placed))
        facts["citus_commands_per_append"] = {
            f"batch_{SMALL_BATCH}": await citus_commands(
                citus, probe, small_batch(f"probe_{probe}", 0)
            ),
            f"batch_{BATCH}": await citus_commands(
                citus, probe, ingest_batches((probe,), BATCH, -2)[probe][:BATCH]
            ),
        }
        return report(arguments, ingest_phases, small_phases, facts)
    finally:
        await close_databases(backends)


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--records", type=int, default=5000, help="ingest: records per tenant per round"
    )
    parser.add_argument("--rounds", type=int, default=5, help="ingest rounds, interleaved")
    parser.add_argument("--seconds", type=float, default=20.0, help="small batches: per round")
    parser.add_argument(
        "--small-rounds", type=int, default=3, help="small-batch rounds, interleaved"
    )
    return parser.parse_args()


@contextmanager
def servers() -> Iterator[tuple[PrivatePostgres, CitusCluster]]:
    """As bench.citus.private_servers (a plain PostgreSQL 15 with the Citus nodes' settings but
    Citus, and a Citus cluster), handing out the plain server itself: its data folder names its
    postmaster."""
    with ExitStack() as stack:
        settings = {k: v for k, v in CITUS_SETTINGS.items() if k != "shared_preload_libraries"}
        plain = PrivatePostgres(bin_dir=PG15_BIN, settings=settings)
        stack.callback(plain.destroy)
        plain.start()
        cluster = stack.enter_context(citus_cluster())
        yield plain, cluster


async def main(arguments: argparse.Namespace) -> dict[str, Any]:
    with servers() as (plain, cluster):
        return await run(arguments, plain, cluster)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(parse_arguments())), indent=2))
