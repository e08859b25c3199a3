"""The scale-out runbook's operations, run verbatim while ingest goes on: add a worker and
rebalance (Step 3), isolate a hot tenant and move it (Step 4). The commands are read from
runbooks/scale-out.md and run as an operator would (psql and `lineage` as subprocesses), with
only the runbook's placeholders filled: the new worker's address, the tenant, the shard id.
Four tenants append through the HTTP service the whole time: no write may fail, every
acknowledged record is stored once, and every walk answers afterwards as it did before."""

import asyncio
import os
import shlex
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from lineage.api.app import create_app
from lineage.db.distribute import distribute
from lineage.db.migrate import migrate
from lineage.services import auth
from lineage.settings import Settings
from tests.citus_cluster import PG15_BIN, CitusCluster, citus_cluster, citus_settings
from tests.conftest import database_at
from tests.fences import fences
from tests.private_postgres import PrivatePostgres
from tests.test_citus_writes import assert_stored_once, worker_port

pytestmark = [pytest.mark.citus, pytest.mark.slow]

RUNBOOK = Path(__file__).resolve().parents[1] / "runbooks" / "scale-out.md"
HOT_TENANT = "acme"  # the runbook's own example
TENANTS = (HOT_TENANT, "tenant_1", "tenant_2", "tenant_3")
BATCH = 5
PAUSE_S = 0.1  # between one writer's batches: ingest that goes on, not a benchmark
OPERATION_TIMEOUT_S = 600.0


def step(title: str) -> list[str]:
    """The commands of the runbook's ```shell block under the heading `### {title}`."""
    lines = RUNBOOK.read_text().splitlines()
    start = lines.index(f"### {title}")
    following = [f for f in fences(lines, str(RUNBOOK)) if f.opening > start]
    assert following and following[0].lang == "shell", f"{title}: no shell block"
    return following[0].body.splitlines()


@pytest.fixture(scope="module")
def grown_cluster() -> Iterator[tuple[CitusCluster, PrivatePostgres]]:
    """Two workers in the cluster and a third server started beside it, not yet added."""
    with citus_cluster() as cluster:
        extra = PrivatePostgres(bin_dir=PG15_BIN, settings=citus_settings())
        try:
            extra.start()
            yield cluster, extra
        finally:
            extra.destroy()


async def run(command: str, env: dict[str, str]) -> str:
    """One runbook line, as a shell runs it; its output. A failing command fails the test."""
    process = await asyncio.create_subprocess_exec(
        "bash",
        "-euo",
        "pipefail",
        "-c",
        command,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(), OPERATION_TIMEOUT_S)
    printed = output.decode()
    assert process.returncode == 0, f"{command}\n{printed}"
    return printed


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def tenants_in_shard(url: str, tenant: str) -> list[str]:
    """The tenants whose shard group is the tenant's."""
    with psycopg.connect(url) as coordinator:
        rows = coordinator.execute(
            "SELECT tenant_id FROM tenants "
            "WHERE get_shard_id_for_distribution_column('tenants', tenant_id) "
            "= get_shard_id_for_distribution_column('tenants', %s::text) ORDER BY tenant_id",
            (tenant,),
        ).fetchall()
    return [name for (name,) in rows]


class Ingest:
    """Four tenants appending 5-record batches through the HTTP service until stopped; what
    was acknowledged, and every answer that was not a 201."""

    def __init__(self, http: httpx.AsyncClient, tokens: dict[str, str]) -> None:
        self.http = http
        self.tokens = tokens
        self.acknowledged: dict[str, set[str]] = {name: set() for name in tokens}
        self.failed: list[tuple[str, int, str]] = []
        self.stop = asyncio.Event()

    async def append(self, tenant: str, tag: str) -> None:
        ids = [f"{tag}_{number}" for number in range(BATCH)]
        batch = [
            {
                "context_id": ids[number],
                "kind": "chunk" if number else "document",
                "source_uri": f"s3://docs/{tag}.md",
                "parent_ids": [f"{tag}_0"] if number else [],
                "content_hash": f"sha256:{number:064x}",
                "transform": "chunker" if number else None,
                "transform_version": "chunker@2" if number else None,
            }
            for number in range(BATCH)
        ]
        answer = await self.http.post(
            "/v1/contexts/batch", json={"records": batch}, headers=bearer(self.tokens[tenant])
        )
        if answer.status_code == 201:
            self.acknowledged[tenant].update(ids)
        else:
            self.failed.append((tenant, answer.status_code, answer.text))

    async def go_on(self, tenant: str) -> None:
        round_ = 0
        while not self.stop.is_set():
            await self.append(tenant, f"during_{round_}")
            round_ += 1
            await asyncio.sleep(PAUSE_S)

    async def walks(self) -> dict[tuple[str, str], Any]:
        answers = {}
        for tenant, token in self.tokens.items():
            for record in ("before_0_4", "before_1_2"):
                walk = await self.http.get(f"/v1/contexts/{record}/lineage", headers=bearer(token))
                assert walk.status_code == 200, walk.text
                answers[tenant, record] = walk.json()
        return answers


async def prepared(cluster: CitusCluster, extra: PrivatePostgres) -> tuple[str, dict[str, str]]:
    """A migrated, distributed database with the tenants, and the new worker's database made
    as the runbook asks (with the extension); the coordinator's URL and each tenant's key."""
    dbname = f"lineage_ops_{uuid.uuid4().hex[:8]}"
    url = cluster.create_database(dbname)
    with psycopg.connect(extra.url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{dbname}"')
    with psycopg.connect(extra.url.rsplit("/", 1)[0] + "/" + dbname, autocommit=True) as node:
        node.execute("CREATE EXTENSION citus")
    migrate(url)
    distribute(url)
    with psycopg.connect(url) as owner:
        for name in TENANTS:
            owner.execute("INSERT INTO tenants (tenant_id) VALUES (%s)", (name,))
    tokens = {}
    async with database_at(url) as database:
        for name in TENANTS:
            tokens[name], _ = await auth.create_key(database, name, "admin")
    return url, tokens


async def run_the_runbook(url: str, cluster: CitusCluster, extra: PrivatePostgres) -> None:
    """Steps 3 and 4 as printed, the placeholders filled; each checked where it lands."""
    env = {
        **os.environ,
        "LINEAGE_DATABASE_URL": url,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    for command in step("Step 3 — Add a worker and rebalance"):
        await run(command.replace("'worker-3.internal', 5432", f"'127.0.0.1', {extra.port}"), env)
    moved = [t for t in TENANTS if worker_port(url, t) == extra.port]
    assert moved, "the rebalance moved no tenant onto the new worker"
    [isolate] = step("Step 4 — Move a hot tenant")
    source = worker_port(url, HOT_TENANT)
    target = next(p for p in (*(w.port for w in cluster.workers), extra.port) if p != source)
    await run(isolate.replace("worker-3.internal:5432", f"127.0.0.1:{target}"), env)
    assert worker_port(url, HOT_TENANT) == target
    assert tenants_in_shard(url, HOT_TENANT) == [HOT_TENANT]


async def test_the_runbooks_operations_run_as_written_while_ingest_goes_on(
    grown_cluster: tuple[CitusCluster, PrivatePostgres], tmp_path: Path
) -> None:
    cluster, extra = grown_cluster
    url, tokens = await prepared(cluster, extra)
    app = create_app(
        Settings(auth="keys", bad_request_limit=100_000, log_interval_s=0, data_dir=tmp_path),
        database_url=url,
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://lineage", timeout=OPERATION_TIMEOUT_S
        ) as http:
            ingest = Ingest(http, tokens)
            for tenant in TENANTS:
                for number in range(2):
                    await ingest.append(tenant, f"before_{number}")
            before = await ingest.walks()
            writers = [asyncio.create_task(ingest.go_on(tenant)) for tenant in TENANTS]
            try:
                await run_the_runbook(url, cluster, extra)
            finally:
                ingest.stop.set()
                await asyncio.gather(*writers)
            after = await ingest.walks()
    assert not ingest.failed, ingest.failed[:5]
    assert after == before
    await assert_stored_once(url, ingest.acknowledged)
    for name in TENANTS:  # ingest went on during the operations
        assert len(ingest.acknowledged[name]) > 2 * BATCH


def test_the_runbook_lines_this_test_fills_in_are_there() -> None:
    """The placeholders this test replaces are the runbook's, so a rewrite of the runbook
    that changes them fails here, not silently in the operations test."""
    add = step("Step 3 — Add a worker and rebalance")
    assert any("'worker-3.internal', 5432" in line for line in add)
    assert [shlex.split(line)[0] for line in add] == ["psql", "lineage", "psql", "psql", "psql"]
    [isolate] = step("Step 4 — Move a hot tenant")
    assert shlex.split(isolate)[:3] == ["lineage", "isolate", HOT_TENANT]
    assert "worker-3.internal:5432" in isolate
