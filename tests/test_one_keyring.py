"""One running app signs with one keyring: the one its config file names (`lineage serve
--config FILE`), for every kind of record it writes, never a second one built from the
environment."""

import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent
from openlineage.client.serde import Serde

from lineage.api.app import create_app
from lineage.db.keyring import load_keyring
from lineage.services import signing
from lineage.services.records import get_records
from lineage.settings import load_settings
from tests.conftest import database_at
from tests.test_otlp import export_request, retriever_span

DOCUMENT = "Contractors get 30 days' notice."
SUMMARY = "Contractors get 30 days' notice."


async def test_records_of_every_route_verify_with_the_configured_keyring(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configured_keyring = tmp_path / "configured" / "signing-keys.json"
    config = tmp_path / "lineage.env"
    config.write_text(f"LINEAGE_SIGNING_KEYS_FILE={configured_keyring}\nLINEAGE_AUTH=none\n")
    # The environment names another data folder (and so another default keyring) than the
    # config file's keyring, whatever the test session set.
    monkeypatch.setenv("LINEAGE_DATA_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.delenv("LINEAGE_SIGNING_KEYS_FILE", raising=False)
    configured = load_settings(config)
    assert configured.signing_keys_file == configured_keyring
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

            async def post(path: str, **body: object) -> dict[str, object]:
                response = await http.post(path, **body)  # type: ignore[arg-type]
                assert response.status_code in (200, 201), (path, response.text)
                found: dict[str, object] = response.json()
                return found

            doc = await post(
                "/v1/contexts",
                json={"kind": "document", "source_uri": "s3://one", "text": DOCUMENT},
            )
            prompt = await post(
                "/v1/contexts",
                json={"kind": "prompt", "parent_ids": [doc["context_id"]], "text": "p"},
            )
            answer = await post(
                "/v1/answers",
                json={
                    "prompt_id": prompt["context_id"],
                    "output": {"claims": [{"text": DOCUMENT, "supported_by": [doc["context_id"]]}]},
                },
            )
            await post(f"/v1/answers/{answer['answer_id']}/verify", json={})
            summary = await post(
                "/v1/contexts",
                json={"kind": "summary", "parent_ids": [doc["context_id"]], "text": SUMMARY},
            )
            handoff = await post(
                f"/v1/contexts/{summary['context_id']}/verify",
                json={
                    "premise_texts": {doc["context_id"]: DOCUMENT, summary["context_id"]: SUMMARY}
                },
            )
            assert handoff["statements"], handoff
            await post(
                "/api/v1/lineage",
                content=Serde.to_json(event),
                headers={"Content-Type": "application/json"},
            )
            traced = await post(
                "/v1/traces",
                json=export_request("ab" * 16, [retriever_span("cd" * 8, str(doc["context_id"]))]),
            )
            assert traced["lineage"]["records"], traced  # type: ignore[index]
            await post("/v1/queries", json={"request_id": "r1", "query": "q", "answer": "a"})
            await post("/v1/forget", json={"source_uri": "s3://one"})
    keyring = load_keyring(configured_keyring, create=False)
    async with database_at(database_url, configured) as database, database.tenant("default") as tx:
        ids = [
            row["context_id"]
            for row in await tx.connection.fetch("SELECT context_id FROM provenance")
        ]
        records = await get_records(tx, ids)
        checks = {
            (record.kind, record.context_id): await signing.verify_record(
                tx.connection, "default", record, keyring
            )
            for record in records.values()
        }
    made = {kind for kind, _ in checks}
    assert made >= {
        "document",  # contexts and OpenLineage datasets
        "prompt",
        "claim",  # answers
        "answer",
        "verdict",  # claims' verdicts and the summary's hand-off verdicts
        "summary",
        "retrieval",  # OTLP intake and queries
        "query",
        "tombstone",
    }, made
    verdicts = [record for record in records.values() if record.kind == "verdict"]
    assert {v.attributes["check"] for v in verdicts} >= {"claim", "statement"}, verdicts
    unverified = {key: check.reason for key, check in checks.items() if not check.verified}
    assert unverified == {}
