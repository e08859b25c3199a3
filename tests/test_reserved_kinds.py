"""Records that are the service's own proof (forget tombstones, judges' verdicts) come only from
their own paths: the public append routes refuse them for every key, and a verdict that did not
come from the service's judge path, or says something outside the verdict vocabulary, is never
a current verdict."""

import re
from collections.abc import AsyncIterator
from typing import get_args

import httpx
import pytest

from lineage.api.app import create_app
from lineage.claims import handoffs, verify
from lineage.claims.verify import current_verdicts
from lineage.core.derive import Derivation, derive_many
from lineage.core.record import RESERVED_KINDS
from lineage.db.database import Database
from lineage.db.named_sql import INCLUDE_DIR
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


async def test_a_verdict_not_from_the_judge_path_is_never_current(
    keyed: httpx.AsyncClient, database: Database
) -> None:
    # As one appended before the routes refused it: outside the vocabulary, and a valid word
    # under a transform that is not the service's judge path.
    store = PostgresStore(database, "acme")
    await derive_many(
        store,
        [
            Derivation(["claim_1"], "a", "verdict", "verify_claims", "1",
                       attributes={"check": "claim", "verdict": "totally-fine", "judge": "x"}),
            Derivation(["claim_1"], "b", "verdict", "my_judge", "1",
                       attributes={"check": "claim", "verdict": "supported", "judge": "y"}),
        ],
    )  # fmt: skip
    current = await current_verdicts(database, "acme", "claim_1")
    assert current == [], current
    read = await bearer(database, "read")
    listed = await keyed.get("/v1/answers/answer_1/verdicts", headers=read)
    assert listed.json()["verdicts"] == [] and listed.json()["history"] == [], listed.json()
    verify = await bearer(database, "verify")
    judged = await keyed.post("/v1/answers/answer_1/verify", headers=verify)
    assert judged.status_code == 200, judged.text
    [verdict] = (await keyed.get("/v1/answers/answer_1/verdicts", headers=read)).json()["verdicts"]
    assert verdict["judge"] not in ("x", "y")


def test_the_sql_knows_the_verdict_vocabulary_the_claims_code_defines() -> None:
    fragment = (INCLUDE_DIR / "judged_verdict.sql").read_text()
    for transform, words in (
        (verify.VERIFY_TRANSFORM, get_args(verify.Verdict)),
        (handoffs.VERIFY_TRANSFORM, get_args(handoffs.Outcome)),
    ):
        listed = re.search(rf"v\.transform = '{transform}'.*?IN \(([^)]*)\)", fragment, re.DOTALL)
        assert listed is not None, transform
        assert sorted(re.findall(r"'(\w+)'", listed.group(1))) == sorted(words), transform
