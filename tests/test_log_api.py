"""The verifiable log over HTTP: /v1/log/key, /checkpoint, /proof/inclusion, /proof/consistency,
tenant-confined, and an auditor's checks through them."""

import asyncio
import base64
from pathlib import Path

import asyncpg
import httpx
import pytest

from lineage.core import metrics
from lineage.core.hashing import content_hash
from lineage.core.record import ContextRecord, NewContext
from lineage.db import keyring
from lineage.db.database import Database
from lineage.services import auth
from lineage.services.demo import ANSWER_ID, load_incident
from lineage.settings import Settings
from lineage.store import PostgresStore
from lineage.verifiable_log import merkle, storage
from lineage.verifiable_log.audit import HttpSource, monitor, verify_walk
from lineage.verifiable_log.checkpoint import VerifierKey
from tests.test_log import documents
from tests.walks_helpers import serve

DOC = {"kind": "document", "source_uri": "s3://policies/a.md", "text": "Policy A"}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        statement_timeout_ms=5000,
        auth="keys",
        data_dir=tmp_path,
        log_interval_s=0,
        signing_keys_file=keyring.keyring_path(Settings()),  # the records' keyring
    )


@pytest.fixture
async def tokens(database: Database, owner_database: Database) -> dict[str, str]:
    """Bearer headers' tokens: default's ingest and read keys, and a read key of tenant rival."""
    await auth.create_tenant(owner_database, "rival")
    return {
        "ingest": (await auth.create_key(database, "default", "ingest"))[0],
        "read": (await auth.create_key(database, "default", "read"))[0],
        "rival": (await auth.create_key(database, "rival", "read"))[0],
    }


@pytest.fixture
def reader(client: httpx.AsyncClient, tokens: dict[str, str]) -> httpx.AsyncClient:
    client.headers["Authorization"] = f"Bearer {tokens['read']}"
    return client


def _b64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


async def test_the_key_and_a_fresh_checkpoint(
    reader: httpx.AsyncClient, tokens: dict[str, str], settings: Settings
) -> None:
    key = (await reader.get("/v1/log/key")).json()
    verifier = VerifierKey.parse(key["verifier_key"])
    assert verifier == storage.signing_key(settings).verifier
    assert (key["key_name"], key["algorithm"]) == ("lineage", "Ed25519")
    assert _b64(key["public_key"]) == verifier.public_key

    appended = await reader.post(
        "/v1/contexts", json=DOC, headers={"Authorization": f"Bearer {tokens['ingest']}"}
    )
    assert appended.status_code == 201
    body = (await reader.get("/v1/log/checkpoint")).json()
    checkpoint = verifier.open(body["note"])
    assert body["tree_size"] == checkpoint.tree_size == 1
    assert _b64(body["root_hash"]) == checkpoint.root_hash
    assert body["origin"] == "lineage/default"
    assert body["time"].endswith("Z")
    record = ContextRecord.model_validate(appended.json())
    assert checkpoint.root_hash == merkle.leaf_hash(record.canonical_bytes())


async def test_proofs_over_http_verify_against_the_checkpoint(
    reader: httpx.AsyncClient, store: PostgresStore, database: Database
) -> None:
    contexts = await load_incident(store)
    first = (await reader.get("/v1/log/checkpoint")).json()
    root1 = _b64(first["root_hash"])
    for context in contexts:
        response = await reader.get(
            "/v1/log/proof/inclusion",
            params={"context_id": context.context_id, "tree_size": first["tree_size"]},
        )
        assert response.status_code == 200, response.text
        body = response.json()
        record = ContextRecord.model_validate(body["record"])
        assert record.context_id == context.context_id
        leaf = merkle.leaf_hash(record.canonical_bytes())
        assert _b64(body["leaf_hash"]) == leaf
        proof = [_b64(h) for h in body["proof"]]
        merkle.verify_inclusion(leaf, body["leaf_index"], first["tree_size"], proof, root1)

    await store.append([_doc("doc_later")])
    second = (await reader.get("/v1/log/checkpoint")).json()
    response = await reader.get(
        "/v1/log/proof/consistency",
        params={"first": first["tree_size"], "second": second["tree_size"]},
    )
    body = response.json()
    assert (body["first"], body["second"]) == (first["tree_size"], second["tree_size"])
    proof = [_b64(h) for h in body["proof"]]
    assert proof == await storage.consistency(
        database, "default", first["tree_size"], second["tree_size"]
    )
    merkle.verify_consistency(
        first["tree_size"], second["tree_size"], root1, _b64(second["root_hash"]), proof
    )


async def test_unknown_and_foreign_ids_are_the_same_404(
    reader: httpx.AsyncClient, database: Database, tokens: dict[str, str]
) -> None:
    await load_incident(PostgresStore(database))
    await load_incident(PostgresStore(database, "rival"))
    rival = {"Authorization": f"Bearer {tokens['rival']}"}
    await reader.get("/v1/log/checkpoint", headers=rival)
    size = (await reader.get("/v1/log/checkpoint")).json()["tree_size"]
    await PostgresStore(database, "rival").append([_doc("rival_only")])
    await reader.get("/v1/log/checkpoint", headers=rival)
    for context_id in ("rival_only", "no_such_id"):
        response = await reader.get(
            "/v1/log/proof/inclusion", params={"context_id": context_id, "tree_size": size}
        )
        same = await reader.get(f"/v1/contexts/{context_id}")
        assert response.status_code == same.status_code == 404
        # Each request's own trace id aside (lineage.api.problems).
        assert response.json() | {"trace_id": "T"} == same.json() | {"trace_id": "T"}
    # The rival's own log holds it; ours does not.
    rival_size = (await reader.get("/v1/log/checkpoint", headers=rival)).json()["tree_size"]
    assert rival_size == size + 1
    response = await reader.get(
        "/v1/log/proof/inclusion",
        params={"context_id": "rival_only", "tree_size": rival_size},
        headers=rival,
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("path", "params", "words"),
    [
        ("inclusion", {"context_id": "doc_a", "tree_size": 0}, "tree_size"),
        ("inclusion", {"context_id": "doc_a", "tree_size": 3}, "between 1 and 2"),
        ("inclusion", {"context_id": "doc_c", "tree_size": 2}, "not in the log yet"),
        ("inclusion", {"context_id": "doc_b", "tree_size": 1}, "outside a tree of size 1"),
        ("consistency", {"first": 2, "second": 1}, "first must be between 1 and second"),
        ("consistency", {"first": 1, "second": 5}, "second must be between 1 and 2"),
        ("consistency", {"first": 0, "second": 2}, "first"),
    ],
)
async def test_bad_sizes_are_refused_saying_why(
    reader: httpx.AsyncClient,
    store: PostgresStore,
    database: Database,
    path: str,
    params: dict[str, int | str],
    words: str,
) -> None:
    for name in ("doc_a", "doc_b"):
        await store.append([_doc(name)])
        await storage.sequence(database, "default")
    await store.append([_doc("doc_c")])  # queued, not yet sequenced
    response = await reader.get(f"/v1/log/proof/{path}", params=params)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert words in response.text


def _doc(context_id: str) -> NewContext:
    return NewContext(
        context_id=context_id,
        kind="document",
        source_uri=f"s3://{context_id}.md",
        content_hash=content_hash(context_id),
    )


async def test_the_log_needs_a_read_key(client: httpx.AsyncClient) -> None:
    for path in ("/v1/log/key", "/v1/log/checkpoint"):
        assert (await client.get(path)).status_code == 401


async def test_an_auditor_checks_a_walk_and_the_log_over_http(
    reader: httpx.AsyncClient, store: PostgresStore
) -> None:
    await load_incident(store)
    source = HttpSource(reader)
    verifier = VerifierKey.parse((await reader.get("/v1/log/key")).json()["verifier_key"])
    saved = await source.checkpoint()
    result = await verify_walk(source, verifier, saved, ANSWER_ID)
    assert result.ok, result.lines()
    assert len(result.included) == 8  # the answer and its seven ancestors
    assert "verified: answer_1 and its 7 ancestors" in result.lines()[-1]
    await store.append([_doc("doc_later")])
    checked = await monitor(source, verifier, saved)
    assert checked.new.tree_size == checked.old.tree_size + 1


async def test_the_service_sequences_and_signs_in_the_background(
    database_url: str, settings: Settings, store: PostgresStore, owner: asyncpg.Connection
) -> None:
    quick = settings.model_copy(update={"log_interval_s": 0.01})
    async with serve(quick, database_url):
        await store.append([_doc("doc_a")])
        for _ in range(500):
            if await owner.fetchval("SELECT count(*) FROM log_checkpoints"):
                break
            await asyncio.sleep(0.01)
    assert await owner.fetchval("SELECT tree_size FROM log_checkpoints") == 1


def refused_total(exposition: str) -> float:
    found = [
        float(line.split()[-1])
        for line in exposition.splitlines()
        if line.startswith("lineage_checkpoints_refused_total ")
    ]
    return found[0] if found else 0.0


async def test_a_refused_checkpoint_is_a_503_logged_and_counted(
    reader: httpx.AsyncClient,
    store: PostgresStore,
    settings: Settings,
    owner: asyncpg.Connection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await store.append(documents(5))
    assert (await reader.get("/v1/log/checkpoint")).status_code == 200
    before = refused_total(metrics.exposition()[0].decode())
    # The witness now holds a longer tree than the database: a restore from an older backup.
    for table in ("log_checkpoints", "log_nodes", "log_leaves", "log_heads", "events"):
        await owner.execute(f"DELETE FROM {table}")
    await owner.execute(
        "INSERT INTO events (tenant_id, position, context_id) "
        "SELECT tenant_id, row_number() OVER (ORDER BY context_id), context_id "
        "FROM provenance ORDER BY context_id LIMIT 3"
    )
    with caplog.at_level("WARNING"):
        refused = await reader.get("/v1/log/checkpoint")
    assert refused.status_code == 503, refused.text
    assert refused.json()["rule"] == "log_integrity"
    assert "runbooks/backup.md" in refused.json()["detail"]
    assert str(settings.data_dir) not in refused.text and "witness" not in refused.text
    [logged] = [r for r in caplog.records if r.levelname == "ERROR" and "refusing" in r.message]
    assert str(settings.data_dir) in logged.message  # the operator's log names the witness
    after = refused_total(metrics.exposition()[0].decode())
    assert after == before + 1
