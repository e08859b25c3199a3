"""One running app signs with one keyring: the one its settings name (as `--config` gives them),
for every kind of record it writes, not a second one built from the environment."""

import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import httpx
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent
from openlineage.client.serde import Serde

from lineage import db
from lineage.api.app import create_app
from lineage.services import signing
from lineage.settings import Settings
from lineage.store.postgres import get_records


async def test_records_of_every_route_verify_with_the_configured_keyring(
    database_url: str, tmp_path: Path, pool: asyncpg.Pool
) -> None:
    # Not the session's LINEAGE_DATA_DIR: a keyring only this app's settings point at.
    configured = Settings(data_dir=tmp_path / "configured", auth="none")
    app = create_app(configured, database_url=database_url)
    event = RunEvent(
        eventType="COMPLETE",  # type: ignore[arg-type]
        eventTime=datetime.now(UTC).isoformat(),
        run=Run(runId=str(uuid.uuid4())),
        job=Job(namespace="etl", name="load"),
        inputs=[InputDataset(namespace="s3://raw", name="orders.csv")],
        outputs=[OutputDataset(namespace="s3://clean", name="orders.parquet")],
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as http:
            posted = await http.post(
                "/v1/contexts", json={"kind": "document", "source_uri": "s3://one", "text": "a"}
            )
            assert posted.status_code == 201, posted.text
            lineage = await http.post(
                "/api/v1/lineage",
                content=Serde.to_json(event),
                headers={"Content-Type": "application/json"},
            )
            assert lineage.status_code == 200, lineage.text
            forgotten = await http.post("/v1/forget", json={"source_uri": "s3://one"})
            assert forgotten.status_code == 200, forgotten.text
    keyring = signing.load_keyring(signing.keyring_path(configured), create=False)
    async with db.transaction(pool, "default") as connection:
        ids = [
            row["context_id"] for row in await connection.fetch("SELECT context_id FROM provenance")
        ]
        records = await get_records(connection, "default", ids)
        checks = {
            (record.kind, record.context_id): await signing.verify_record(
                connection, "default", record, keyring
            )
            for record in records.values()
        }
    assert {kind for kind, _ in checks} >= {"document", "tombstone"}
    assert len(checks) >= 4  # the posted document, two datasets, a tombstone
    unverified = {key: check.reason for key, check in checks.items() if not check.verified}
    assert unverified == {}
