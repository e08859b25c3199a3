"""A backlog in the log's queue (a crash, a bulk load with the sequencer off) is integrated in
the background, a bounded step per transaction: a checkpoint request integrates at most one
step and says how far behind its checkpoint is, and /metrics shows what is still queued."""

from pathlib import Path

import httpx
import pytest

from lineage.api.app import create_app
from lineage.core import metrics
from lineage.db import keyring
from lineage.db.database import Database
from lineage.db.distribute import distribute
from lineage.db.migrate import migrate
from lineage.settings import Settings
from lineage.store import PostgresStore
from lineage.verifiable_log import storage
from tests.citus_cluster import CitusCluster
from tests.conftest import database_at
from tests.test_log import documents

BACKLOG = 2500
STEP = 400


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        statement_timeout_ms=5000,
        auth="none",
        data_dir=tmp_path,
        log_interval_s=0,  # the sequencer off: appends queue up
        log_step_leaves=STEP,
        signing_keys_file=keyring.keyring_path(Settings()),  # the records' keyring
    )


def queued_metric(tenant_id: str) -> float | None:
    prefix = f'lineage_log_queued_records{{tenant="{tenant_id}"}} '
    for line in metrics.exposition()[0].decode().splitlines():
        if line.startswith(prefix):
            return float(line.removeprefix(prefix))
    return None


async def integrates_one_step_and_the_round_drains_the_rest(
    client: httpx.AsyncClient, store: PostgresStore, database: Database, settings: Settings
) -> None:
    for start in range(0, BACKLOG, 500):
        await store.append(documents(500, tag=str(start)))

    sizes = [0]
    for _ in range(2):
        answer = await client.get("/v1/log/checkpoint")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert sizes[-1] < body["tree_size"] <= sizes[-1] + STEP, (sizes, body["tree_size"])
        sizes.append(body["tree_size"])
        assert body["queued"] == BACKLOG - body["tree_size"]
        assert queued_metric("default") == BACKLOG - body["tree_size"]

    await storage.run_once(database, settings)  # the background round drains in steps
    drained = (await client.get("/v1/log/checkpoint")).json()
    assert (drained["tree_size"], drained["queued"]) == (BACKLOG, 0)
    assert queued_metric("default") == 0


async def test_a_checkpoint_request_integrates_one_step_and_the_round_drains_the_rest(
    client: httpx.AsyncClient, store: PostgresStore, database: Database, settings: Settings
) -> None:
    await integrates_one_step_and_the_round_drains_the_rest(client, store, database, settings)


@pytest.mark.citus
@pytest.mark.slow
async def test_the_same_on_citus(citus: CitusCluster, settings: Settings) -> None:
    url = citus.create_database("lineage_log_backlog")
    migrate(url)
    distribute(url)
    app = create_app(settings, database_url=url)
    async with (
        database_at(url, settings) as database,
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://l") as client,
    ):
        store = PostgresStore(database)
        await integrates_one_step_and_the_round_drains_the_rest(client, store, database, settings)
