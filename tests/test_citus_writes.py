"""Writes on Citus (a coordinator and two workers, default settings, after `lineage
distribute`): an append, single or batch, is one router call on its tenant's worker, and a
worker's failure stops only its own tenants' appends and reads, with a 503 and Retry-After,
never a 500; after it returns, nothing acknowledged is lost or stored twice."""

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import psycopg
import pytest
from typer.testing import CliRunner

from lineage import cli
from lineage.api.app import create_app
from lineage.core.errors import NotDistributable
from lineage.core.record import NewContext
from lineage.db.database import Database
from lineage.db.distribute import distribute, isolate
from lineage.db.errors import is_outage
from lineage.db.migrate import migrate
from lineage.db.named_sql import QUERIES
from lineage.services import auth, postings_merge
from lineage.services.appends import append_records
from lineage.settings import Settings
from tests.citus_cluster import CitusCluster, citus_cluster, tenant_port
from tests.conftest import database_at

pytestmark = [pytest.mark.citus, pytest.mark.slow]

HANG_GUARD_S = 60.0


def documents(prefix: str, count: int) -> list[NewContext]:
    return [
        NewContext(
            context_id=f"{prefix}_{number}",
            kind="document",
            source_uri=f"s3://docs/{prefix}/{number}.md",
            content_hash=f"sha256:{number:064x}",
        )
        for number in range(count)
    ]


def chunks_of(parent: str, count: int) -> list[NewContext]:
    return [
        NewContext(
            context_id=f"{parent}_chunk_{number}",
            kind="chunk",
            parent_ids=[parent],
            content_hash=f"sha256:{number + 1000:064x}",
            transform="chunker",
            transform_version="chunker@2",
        )
        for number in range(count)
    ]


def worker_port(url: str, tenant: str) -> int:
    with psycopg.connect(url) as coordinator:
        return tenant_port(coordinator, tenant)


async def assert_stored_once(url: str, acknowledged: dict[str, set[str]]) -> None:
    """Each tenant's stored records are the acknowledged ones, each stored once."""
    owner = await asyncpg.connect(url)
    try:
        for name, records in acknowledged.items():
            stored = await owner.fetch(
                "SELECT context_id, count(*) AS copies FROM provenance WHERE tenant_id = $1 "
                "GROUP BY context_id",
                name,
            )
            assert {row["context_id"] for row in stored} == records
            assert {row["copies"] for row in stored} == {1}
    finally:
        await owner.close()


def prepared(cluster: CitusCluster, tenants: int) -> tuple[str, list[str]]:
    """A migrated, distributed database with `tenants` tenants; its URL and their ids."""
    url = cluster.create_database(f"lineage_writes_{uuid.uuid4().hex[:8]}")
    migrate(url)
    distribute(url)
    names = [f"tenant_{number}" for number in range(tenants)]
    with psycopg.connect(url) as owner:
        for name in names:
            owner.execute("INSERT INTO tenants (tenant_id) VALUES (%s)", (name,))
    return url, names


async def logged_append(database: Database, tenant: str, records: list[NewContext]) -> Any:
    """Append through the service; the append's own statement, with its arguments."""
    logged: list[Any] = []
    async with database.tenant(tenant) as tx:
        tx.connection.add_query_logger(logged.append)
        await append_records(tx, records)
    [call] = [q for q in logged if q.query == QUERIES["append_records"].sql]
    return call


@pytest.mark.parametrize("size", [1, 40])
async def test_an_append_is_one_router_call_on_its_tenants_worker(
    citus: CitusCluster, size: int
) -> None:
    """EXPLAIN of the append the service sends (single and batch, with parents in and out of
    the batch): one task, on the tenant's worker, nothing pulled to the coordinator."""
    url, [tenant, *_] = prepared(citus, 2)
    async with database_at(url) as database:
        await logged_append(database, tenant, documents("doc", 1))
        call = await logged_append(
            database, tenant, [*documents("more", 1), *chunks_of("doc_0", size - 1)]
        )
    owner = await asyncpg.connect(url)
    try:
        plan = "\n".join(
            row[0] for row in await owner.fetch(f"EXPLAIN (VERBOSE) {call.query}", *call.args)
        )
    finally:
        await owner.close()
    assert "Task Count: 1" in plan, plan
    assert plan.count("Task Count") == 1, plan
    assert f"port={worker_port(url, tenant)}" in plan, plan
    for distributed_step in ("intermediate result", "Subplan", "pull to coordinator"):
        assert distributed_step.lower() not in plan.lower(), plan


async def test_the_postings_merge_is_one_router_call_and_merges(citus: CitusCluster) -> None:
    """The background round's merge of a tenant's small postings rows (migration 0049) runs on
    the tenant's worker alone, like the append, and leaves the rows merged."""
    url, [tenant, other] = prepared(citus, 2)
    async with database_at(url) as database:
        for name in (tenant, other):
            await logged_append(database, name, documents("doc", 1))
            for batch in range(12):
                await logged_append(database, name, [
                    NewContext(context_id=f"c_{batch}_{n}", kind="chunk", parent_ids=["doc_0"],
                               content_hash=f"sha256:{batch * 100 + n + 1:064x}")
                    for n in range(5)
                ])  # fmt: skip
        owner = await asyncpg.connect(url)
        try:
            plan = "\n".join(row[0] for row in await owner.fetch(
                "EXPLAIN (VERBOSE) SELECT * FROM lineage_postings_merge($1, 100)", tenant
            ))  # fmt: skip
            assert "Task Count: 1" in plan, plan
            assert f"port={worker_port(url, tenant)}" in plan, plan
            done = await postings_merge.merge_pending(database)
            assert {name: merged.records for name, merged in done.items()} == {
                tenant: 61,
                other: 61,
            }
            rows = await owner.fetch(
                "SELECT tenant_id, count(*) AS rows FROM invalidation_postings "
                "WHERE kind = 'chunk' GROUP BY tenant_id"
            )
            assert {row["tenant_id"]: row["rows"] for row in rows} == {tenant: 1, other: 1}
        finally:
            await owner.close()


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[CitusCluster]:
    """A cluster of this module's own: its test stops a worker."""
    with citus_cluster() as cluster:
        yield cluster


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_dead_worker_stops_only_its_own_tenants(
    own_cluster: CitusCluster, tmp_path: Path
) -> None:
    url, names = prepared(own_cluster, 8)
    by_port: dict[int, list[str]] = {}
    for name in names:
        by_port.setdefault(worker_port(url, name), []).append(name)
    assert len(by_port) == 2, by_port  # eight tenants hashed onto both workers
    tokens = {}
    async with database_at(url) as database:
        for name in names:
            tokens[name], _ = await auth.create_key(database, name, "admin")
    app = create_app(
        Settings(auth="keys", bad_request_limit=1000, log_interval_s=0, data_dir=tmp_path),
        database_url=url,
    )
    acknowledged: dict[str, set[str]] = {name: set() for name in names}

    async def append(http: httpx.AsyncClient, tenant: str, tag: str) -> httpx.Response:
        batch = [
            {
                "context_id": f"{tag}_{number}",
                "kind": "document",
                "source_uri": f"s3://docs/{tag}/{number}.md",
                "content_hash": f"sha256:{number:064x}",
            }
            for number in range(5)
        ]
        answer = await http.post(
            "/v1/contexts/batch", json={"records": batch}, headers=bearer(tokens[tenant])
        )
        if answer.status_code == 201:
            acknowledged[tenant].update(record["context_id"] for record in batch)
        return answer

    dead_port, live_port = sorted(by_port)
    dead_worker = next(w for w in own_cluster.workers if w.port == dead_port)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://lineage", timeout=HANG_GUARD_S
        ) as http:
            for name in names:
                assert (await append(http, name, "before")).status_code == 201
            dead_worker.stop("immediate")
            try:
                for round_ in range(3):
                    for name in by_port[live_port]:
                        answer = await append(http, name, f"during_{round_}")
                        assert answer.status_code == 201, answer.text
                        walk = await http.get(
                            "/v1/contexts/before_0/lineage", headers=bearer(tokens[name])
                        )
                        assert walk.status_code == 200, walk.text
                    for name in by_port[dead_port]:
                        answer = await append(http, name, f"during_{round_}")
                        assert answer.status_code == 503, answer.text
                        assert "Retry-After" in answer.headers
            finally:
                dead_worker.start()
            await asyncio.sleep(1)
            for name in by_port[dead_port]:
                assert (await append(http, name, "after")).status_code == 201
    await assert_stored_once(url, acknowledged)


async def test_a_worker_without_the_vouching_key_says_so_until_distribute_runs(
    citus: CitusCluster,
) -> None:
    """A worker added without `lineage distribute` run since holds no copy of the tenant
    vouching key: its tenants are refused with an operator's error (a 503 through the service)
    that names what to run, not "relation does not exist"; distribute places the key again."""
    url, [tenant, *_] = prepared(citus, 2)
    port = worker_port(url, tenant)
    index = next(i for i, w in enumerate(citus.workers) if w.port == port)
    dbname = url.rsplit("/", 1)[1]
    with psycopg.connect(citus.worker_url(index, dbname), autocommit=True) as worker:
        worker.execute("DROP TABLE tenant_vouching_key")
    async with database_at(url) as database:
        with pytest.raises(asyncpg.OperatorInterventionError, match="no tenant vouching key") as e:
            await logged_append(database, tenant, documents("doc", 1))
        assert is_outage(e.value)  # the service answers 503 with Retry-After
        distribute(url)
        await logged_append(database, tenant, documents("doc", 1))


def test_isolate_refuses_what_it_cannot_do_and_moves_nothing(citus: CitusCluster) -> None:
    """An unknown tenant, an address that is no worker, the tenant's own worker (Citus cannot
    split in place while writes go on), a --worker that is not HOST:PORT: each a clear error
    naming the fix, and no shard placed anew."""
    url, [tenant, *_] = prepared(citus, 2)
    own = worker_port(url, tenant)
    other = next(worker.port for worker in citus.workers if worker.port != own)
    placements = "SELECT shardid, groupid FROM pg_dist_placement ORDER BY shardid"
    with psycopg.connect(url) as coordinator:
        before = coordinator.execute(placements).fetchall()
    with pytest.raises(NotDistributable, match="no tenant 'nobody'"):
        isolate(url, "nobody", "127.0.0.1", other)
    with pytest.raises(NotDistributable, match=r"no active worker at 127\.0\.0\.1:1 "):
        isolate(url, tenant, "127.0.0.1", 1)
    with pytest.raises(NotDistributable, match=r"is on 127\.0\.0\.1:\d+ already: name another"):
        isolate(url, tenant, "127.0.0.1", own)
    malformed = CliRunner().invoke(
        cli.app, ["isolate", tenant, "--worker", "worker-3"], env={"LINEAGE_DATABASE_URL": url}
    )
    assert malformed.exit_code != 0
    assert "give HOST:PORT" in malformed.output
    with psycopg.connect(url) as coordinator:
        assert coordinator.execute(placements).fetchall() == before
