"""Records that are the service's own proof (forget tombstones, judges' verdicts) come only from
their own paths: the public append routes refuse them for every key."""

from collections.abc import AsyncIterator

import httpx
import pytest

from lineage.api.app import create_app
from lineage.core.record import RESERVED_KINDS
from lineage.db.database import Database
from lineage.services import auth
from lineage.services.demo import CONTRACTOR_POLICY, load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore


@pytest.fixture
async def keyed(
    database_url: str, database: Database, owner_database: Database
) -> AsyncIterator[httpx.AsyncClient]:
    await auth.create_tenant(owner_database, "acme")
    await load_incident(PostgresStore(database, "acme"))
    settings = Settings(statement_timeout_ms=5000, auth="keys", bad_request_limit=1000)
    app = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as client:
            yield client


async def bearer(database: Database, scope: str) -> dict[str, str]:
    token, _ = await auth.create_key(database, "acme", scope)
    return {"Authorization": f"Bearer {token}"}


def forged(kind: str) -> dict[str, object]:
    if kind == "tombstone":
        return {
            "kind": "tombstone", "transform": "forget", "transform_version": "forget@1",
            "parent_ids": ["doc_contractors_v1", "doc_contractors_v2"], "text": "forged",
            "attributes": {"forgotten": "source_uri"},
        }  # fmt: skip
    return {
        "kind": "verdict", "parent_ids": ["claim_1"], "text": "forged",
        "transform": "verify_claims",
        "attributes": {"check": "claim", "verdict": "totally-fine", "judge": "anyone"},
    }  # fmt: skip


async def test_an_ingest_key_cannot_forge_a_forget_tombstone(
    keyed: httpx.AsyncClient, database: Database
) -> None:
    ingest = await bearer(database, "ingest")
    single = await keyed.post("/v1/contexts", json=forged("tombstone"), headers=ingest)
    assert single.status_code == 422, single.text
    assert single.json()["rule"] == "reserved_kind"
    assert "POST /v1/forget" in single.json()["detail"]
    batch = await keyed.post(
        "/v1/contexts/batch", json={"records": [forged("tombstone")]}, headers=ingest
    )
    assert batch.status_code == 422, batch.text
    assert batch.json()["rule"] == "reserved_kind"
    # The forget that follows appends its own tombstones, as if nothing had been sent.
    admin = await bearer(database, "admin")
    forgotten = await keyed.post("/v1/forget", json={"source_uri": CONTRACTOR_POLICY},
                                 headers=admin)  # fmt: skip
    assert forgotten.status_code == 200, forgotten.text
    assert forgotten.json()["tombstone_ids"], forgotten.json()


@pytest.mark.parametrize("kind", sorted(RESERVED_KINDS))
async def test_no_key_appends_a_reserved_kind_through_the_public_routes(
    keyed: httpx.AsyncClient, database: Database, kind: str
) -> None:
    for scope in auth.SCOPES:
        headers = await bearer(database, scope)
        single = await keyed.post("/v1/contexts", json=forged(kind), headers=headers)
        batch = await keyed.post(
            "/v1/contexts/batch", json={"records": [forged(kind)]}, headers=headers
        )
        for answer in (single, batch):
            if scope not in ("ingest", "admin"):  # keys that append nothing at all
                assert answer.status_code == 403, (scope, answer.text)
                continue
            assert answer.status_code == 422, (scope, kind, answer.text)
            assert answer.json()["rule"] == "reserved_kind", answer.json()
    listed = await keyed.get("/v1/contexts?kind=all", headers=await bearer(database, "read"))
    assert kind not in {record["kind"] for record in listed.json()["records"]}
