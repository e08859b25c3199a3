"""Privacy by default, on a real PostgreSQL: capture switches per class of text, keyed text
hashes per tenant, and the right-to-be-forgotten flow (CLI, API, audit, scopes)."""

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from typer.testing import CliRunner

from lineage import cli, db
from lineage.api.app import create_app
from lineage.claims.answers import capture_texts, record_answer, record_prompt
from lineage.core.derive import Context, derive
from lineage.core.errors import BadParameter, InvalidRecord, NotFound
from lineage.core.hashing import content_hash, text_matches_hash
from lineage.core.record import KEYED_KINDS
from lineage.db.database import Database
from lineage.services import auth, forget, privacy
from lineage.services.auth import Caller
from lineage.services.demo import CONTRACTOR_POLICY, INCIDENT, load_incident
from lineage.settings import Settings
from lineage.store.http import HttpStore
from lineage.store.postgres import PostgresStore

ADMIN = Caller("default", None, "admin")
ALL_ON = dict.fromkeys(privacy.CAPTURE_SWITCHES, True)
# The demo's contractor policy (both revisions) and everything derived from it.
CONTRACTOR_RADIUS = {
    "doc_contractors_v1", "doc_contractors_v2", "chunk_42", "chunk_58", "retrieval_1",
    "summary_1", "claim_1", "answer_1",
}  # fmt: skip
INCIDENT_TEXTS = {item.context_id or "": item.text for item in INCIDENT}


async def captured(owner: asyncpg.Connection) -> set[str]:
    """Every id with captured text, as the superuser sees context_text (no RLS)."""
    return {row["context_id"] for row in await owner.fetch("SELECT context_id FROM context_text")}


async def provenance(owner: asyncpg.Connection) -> dict[str, tuple[Any, ...]]:
    rows = await owner.fetch("SELECT * FROM provenance")
    return {row["context_id"]: tuple(row.values()) for row in rows}


async def audited(owner: asyncpg.Connection, action: str) -> list[dict[str, Any]]:
    rows = await owner.fetch(
        "SELECT key_id, target, detail FROM audit_log WHERE action = $1 ORDER BY audit_id", action
    )
    return [dict(row) | {"detail": json.loads(row["detail"])} for row in rows]


async def text_hash_key(owner: asyncpg.Connection, tenant_id: str) -> bytes:
    key: bytes = await owner.fetchval(
        "SELECT text_hash_key FROM tenant_settings WHERE tenant_id = $1", tenant_id
    )
    return key


async def one_of_each_kind(store: PostgresStore) -> dict[str, Context]:
    """A record of each class of text: source (document, chunk), query, answer (claim, answer)."""
    document = await derive(store, [], "Contractors: 14 days.", "document", source_uri="s3://c")
    chunk = await derive(store, [document], "14 days.", "chunk", "chunker", "1")
    query = await derive(
        store, [], "What notice do contractors get?", "query", source_uri="chat://1"
    )
    prompt = await record_prompt(store, [chunk])
    claim = await derive(store, [prompt, chunk], "Contractors get 14 days [c].", "claim")
    answer = await derive(store, [claim], "Contractors get 14 days.", "answer")
    return {c.record.kind: c for c in (document, chunk, query, claim, answer)}


# --- capture switches --------------------------------------------------------------------------


async def test_capture_is_off_by_default_and_refused_with_the_command_that_turns_it_on(
    store: PostgresStore, database: Database, owner: asyncpg.Connection
) -> None:
    settings = await privacy.get_settings(database, "default")
    assert settings.model_dump() == {"tenant_id": "default"} | dict.fromkeys(
        privacy.CAPTURE_SWITCHES, False
    )
    records = await one_of_each_kind(store)
    texts = {c.context_id: c.text for c in records.values()}
    with pytest.raises(InvalidRecord) as refused:
        await capture_texts(database, "default", texts)
    assert refused.value.rule == "capture_off"
    assert (
        "lineage tenant settings default --capture-answer-text --capture-query-text "
        "--capture-source-text" in refused.value.message
    )
    prompt_id = records["claim"].parent_ids[0]
    with pytest.raises(InvalidRecord, match="capture_off"):
        await record_answer(store, prompt_id, {"text": "14 days."}, capture_text=True)
    assert await captured(owner) == set()
    # Refused whole: the answer that asked for capture was not recorded either.
    assert await owner.fetchval("SELECT count(*) FROM provenance WHERE kind = 'answer'") == 1


@pytest.mark.parametrize("switch", privacy.CAPTURE_SWITCHES)
async def test_each_switch_captures_only_its_class_of_text(
    switch: str,
    store: PostgresStore,
    pool: asyncpg.Pool,
    database: Database,
    owner: asyncpg.Connection,
) -> None:
    records = await one_of_each_kind(store)
    await privacy.update_settings(database, ADMIN, {switch: True})
    expected = set()
    for kind, record in records.items():
        if privacy.capture_switch(kind) == switch:
            assert await capture_texts(database, "default", {record.context_id: record.text})
            expected.add(record.context_id)
        else:
            with pytest.raises(InvalidRecord, match="capture_off"):
                await capture_texts(database, "default", {record.context_id: record.text})
    assert await captured(owner) == expected
    assert {privacy.capture_switch(k) for k in records} == set(privacy.CAPTURE_SWITCHES)


async def check_text_is_captured_only_when_switched_on(
    database: Database, tenant: str, query: Context, switch_on: Callable[[str], Awaitable[object]]
) -> None:
    """Behind the service's check, for an INSERT that skips it: as the application role, a
    query's text is refused until capture_query_text is on (capture_source_text is not enough)."""
    insert = "INSERT INTO context_text (tenant_id, context_id, text) VALUES ($1, $2, $3)"
    for switch in (None, "capture_source_text"):
        if switch:
            await switch_on(switch)
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            async with database.tenant(tenant) as tx:
                await tx.connection.execute(insert, tenant, query.context_id, query.text)
    await switch_on("capture_query_text")
    async with database.tenant(tenant) as tx:
        await tx.connection.execute(insert, tenant, query.context_id, query.text)


async def test_the_database_refuses_text_the_tenant_does_not_capture(
    store: PostgresStore, database: Database, owner: asyncpg.Connection
) -> None:
    """(tests/test_citus.py checks it on every shard.)"""
    query = await derive(store, [], "my salary?", "query", source_uri="chat://2")

    async def switch_on(switch: str) -> None:
        await privacy.update_settings(database, ADMIN, {switch: True})

    await check_text_is_captured_only_when_switched_on(database, "default", query, switch_on)
    assert await captured(owner) == {query.context_id}


async def test_the_application_role_may_change_the_switches_but_never_the_key(
    pool: asyncpg.Pool, database: Database, owner: asyncpg.Connection
) -> None:
    key = await text_hash_key(owner, "default")
    # Only to a key the owner registered for the tenant (tenant_text_keys), which the role
    # cannot write.
    with pytest.raises(asyncpg.ForeignKeyViolationError, match="registered"):
        async with db.transaction(pool, "default") as connection:
            await connection.execute("UPDATE tenant_settings SET text_hash_key = '\\x00'")
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        async with db.transaction(pool, "default") as connection:
            await connection.execute("INSERT INTO tenant_text_keys VALUES ('default', '\\x00')")
    assert await text_hash_key(owner, "default") == key
    updated = await privacy.update_settings(database, ADMIN, {"capture_query_text": True})
    assert (updated.capture_query_text, updated.capture_answer_text) == (True, False)
    assert await audited(owner, "tenant_settings") == [
        {"key_id": None, "target": "default", "detail": {"capture_query_text": True}}
    ]
    with pytest.raises(InvalidRecord, match="unknown_setting"):
        await privacy.update_settings(database, ADMIN, {"text_hash_key": True})


# --- keyed hashes ------------------------------------------------------------------------------


async def test_query_claim_and_answer_hashes_are_keyed_per_tenant_documents_stay_plain(
    database: Database, owner_database: Database, owner: asyncpg.Connection
) -> None:
    await auth.create_tenant(owner_database, "other")
    mine = await one_of_each_kind(PostgresStore(database))
    theirs = await one_of_each_kind(PostgresStore(database, "other"))
    key, other_key = await text_hash_key(owner, "default"), await text_hash_key(owner, "other")
    assert key != other_key
    for kind in ("document", "chunk"):
        plain = content_hash(mine[kind].text)
        assert mine[kind].record.content_hash == theirs[kind].record.content_hash == plain
    for kind in KEYED_KINDS:
        digest, text = mine[kind].record.content_hash, mine[kind].text
        assert digest.startswith("hmacsha256:")
        assert digest not in {content_hash(text), theirs[kind].record.content_hash}
        stored = await owner.fetchval(
            "SELECT content_hash FROM provenance WHERE context_id = $1", mine[kind].context_id
        )
        assert stored == digest
        assert text_matches_hash(text, digest, key)
        assert not text_matches_hash(text, digest, other_key)
        assert not text_matches_hash(text, digest)  # without the key nothing is confirmed
        assert not text_matches_hash(text + "?", digest, key)


async def test_every_way_in_stores_the_same_keyed_hash(
    store: PostgresStore, client: httpx.AsyncClient
) -> None:
    text = "What notice do contractors get?"
    sdk = await derive(store, [], text, "query", source_uri="chat://sdk")
    as_text = await client.post(
        "/v1/contexts", json={"kind": "query", "text": text, "source_uri": "chat://text"}
    )
    as_sha256 = await client.post(
        "/v1/contexts",
        json={"kind": "query", "content_hash": content_hash(text), "source_uri": "chat://sha"},
    )
    http_store = HttpStore("http://lineage", client=client)
    over_http = await derive(http_store, [], text, "query", source_uri="chat://http")
    hashes = {
        sdk.record.content_hash,
        as_text.json()["content_hash"],
        as_sha256.json()["content_hash"],
        over_http.record.content_hash,
    }
    assert len(hashes) == 1 and hashes.pop().startswith("hmacsha256:")
    unkeyable = await client.post(
        "/v1/contexts",
        json={
            "kind": "answer",
            "content_hash": "sha256:" + "0" * 32,
            "parent_ids": [sdk.context_id],
        },
    )
    # A sha256 digest is 64 hex digits: a shorter one is refused before it could be keyed.
    assert unkeyable.status_code == 422 and unkeyable.json()["rule"] == "malformed_hash"


@pytest.mark.parametrize("algorithm", ["md5", "blake3", "sha1"])
async def test_a_hash_the_service_cannot_check_is_refused_naming_the_ones_it_can(
    client: httpx.AsyncClient, owner: asyncpg.Connection, algorithm: str
) -> None:
    refused = await client.post(
        "/v1/contexts",
        json={
            "kind": "document",
            "content_hash": f"{algorithm}:" + "0" * 32,
            "source_uri": "s3://policies/any.md",
        },
    )
    assert refused.status_code == 422, refused.text
    problem = refused.json()
    assert problem["rule"] == "unverifiable_hash"
    assert "sha256" in problem["detail"] and "hmacsha256" in problem["detail"]
    assert await owner.fetchval("SELECT count(*) FROM provenance") == 0
    # A record of that kind already stored is never judged against a text sent for it.
    assert not text_matches_hash("any premise at all", f"{algorithm}:" + "0" * 32)


async def test_deterministic_ids_of_keyed_kinds_come_from_the_keyed_hash(
    store: PostgresStore, client: httpx.AsyncClient, owner: asyncpg.Connection
) -> None:
    first = await derive(store, [], "q", "query", source_uri="chat://d", deterministic=True)
    again = await derive(store, [], "q", "query", source_uri="chat://d", deterministic=True)
    assert first.context_id == again.context_id
    assert await owner.fetchval("SELECT count(*) FROM provenance") == 1
    with pytest.raises(InvalidRecord, match="deterministic_keyed_id"):
        await derive(
            HttpStore("http://lineage", client=client), [], "q", "query",
            source_uri="chat://d", deterministic=True,
        )  # fmt: skip


# --- forget ------------------------------------------------------------------------------------


@pytest.fixture
async def incident(store: PostgresStore, database: Database) -> None:
    """The demo incident with every text captured."""
    await load_incident(store)
    await privacy.update_settings(database, ADMIN, ALL_ON)
    await capture_texts(database, "default", INCIDENT_TEXTS)


@pytest.mark.usefixtures("incident")
async def test_forget_purges_text_in_the_blast_radius_and_appends_a_tombstone(
    database: Database, settings: Settings, owner: asyncpg.Connection
) -> None:
    before = await provenance(owner)
    forgotten = await forget.forget(database, settings, ADMIN, CONTRACTOR_POLICY)
    assert {node["context_id"] for node in forgotten.affected} == CONTRACTOR_RADIUS
    assert forgotten.counts_by_kind["document"] == 2
    assert set(forgotten.purged_text_ids) == CONTRACTOR_RADIUS
    assert await captured(owner) == set(INCIDENT_TEXTS) - CONTRACTOR_RADIUS
    # Provenance is untouched; one record more: the tombstone, under both revisions.
    after = await provenance(owner)
    assert set(after) - set(before) == set(forgotten.tombstone_ids)
    assert {i: after[i] for i in before} == before
    [tombstone] = await owner.fetch("SELECT * FROM provenance WHERE kind = 'tombstone'")
    assert tombstone["parent_ids"] == ["doc_contractors_v1", "doc_contractors_v2"]
    attributes = json.loads(tombstone["attributes"])
    assert attributes["source_uri_hash"] == forgotten.source_uri_hash
    assert attributes["records"] == 8 and attributes["purged_texts"] == 8
    assert CONTRACTOR_POLICY not in json.dumps(dict(tombstone), default=str)
    # Its root sources are in the postings alone, so the radius by source still lists it.
    async with database.tenant("default") as tx:
        radius = await db.fetch(
            tx.connection, "blast_radius_ids_by_source",
            tenant_id="default", source_uri=CONTRACTOR_POLICY, kind="all", max_depth=20,
        )  # fmt: skip
    assert tombstone["context_id"] in {row["context_id"] for row in radius}
    [entry] = await audited(owner, "forget")
    assert entry["target"] == forgotten.source_uri_hash
    assert entry["detail"]["total"] == 8 and entry["detail"]["purged_texts"] == 8

    rerun = await forget.forget(database, settings, ADMIN, CONTRACTOR_POLICY)
    assert rerun.nothing_left and "nothing left to purge" in rerun.summary
    assert {node["context_id"] for node in rerun.affected} == CONTRACTOR_RADIUS
    assert await owner.fetchval("SELECT count(*) FROM provenance WHERE kind = 'tombstone'") == 1
    assert len(await audited(owner, "forget")) == 2


@pytest.mark.usefixtures("incident")
async def test_forget_says_exactly_what_stays_readable_and_it_is_so(
    database: Database, settings: Settings, owner: asyncpg.Connection
) -> None:
    forgotten = await forget.forget(database, settings, ADMIN, CONTRACTOR_POLICY)
    remaining = forgotten.remaining
    # What the database still shows to anyone who can read the tenant's provenance.
    sources = await owner.fetch(
        "SELECT content_hash FROM provenance WHERE tenant_id = 'default' AND source_uri = $1",
        CONTRACTOR_POLICY,
    )
    kept = await owner.fetch(
        "SELECT attributes::text FROM provenance WHERE tenant_id = 'default' "
        "AND context_id = ANY ($1)",
        sorted(CONTRACTOR_RADIUS),
    )
    assert remaining["source_uri_records"] == len(sources) == 2
    assert remaining["plain_hash_records"] == sum(
        1 for row in sources if row["content_hash"].startswith("sha256:")
    )
    assert remaining["records_kept"] == len(kept) == len(CONTRACTOR_RADIUS)
    assert remaining["records_with_attributes"] == sum(
        1 for row in kept if row["attributes"] != "{}"
    )
    assert "append-only" in remaining["why"]
    assert "the URI stays readable on 2 records" in forgotten.summary


@pytest.mark.usefixtures("incident")
async def test_forget_refuses_a_truncated_walk_and_writes_nothing(
    database: Database, settings: Settings, owner: asyncpg.Connection
) -> None:
    before = await provenance(owner)
    with pytest.raises(BadParameter, match="deeper than max_depth 2"):
        await forget.forget(database, settings, ADMIN, CONTRACTOR_POLICY, max_depth=2)
    with pytest.raises(NotFound):
        await forget.forget(database, settings, ADMIN, "s3://never-recorded")
    assert await captured(owner) == set(INCIDENT_TEXTS)
    assert await provenance(owner) == before
    assert await audited(owner, "forget") == []


async def test_many_sources_get_several_tombstones(
    store: PostgresStore,
    database: Database,
    settings: Settings,
    owner: asyncpg.Connection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(forget, "MAX_PARENTS", 2)
    for number in range(5):
        await derive(store, [], f"revision {number}", "document", source_uri="s3://person")
    forgotten = await forget.forget(database, settings, ADMIN, "s3://person")
    assert len(forgotten.tombstone_ids) == 3 and not forgotten.purged_text_ids
    rows = await owner.fetch(
        "SELECT parent_ids FROM provenance WHERE kind = 'tombstone' ORDER BY attributes->'part'"
    )
    assert [len(row["parent_ids"]) for row in rows] == [2, 2, 1]
    assert sorted(p for row in rows for p in row["parent_ids"]) == sorted(
        node["context_id"] for node in forgotten.affected
    )


@pytest.fixture
async def keyed_http(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(statement_timeout_ms=5000, auth="keys"), database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as http:
            yield http


@pytest.mark.usefixtures("incident")
async def test_forget_and_settings_over_the_api_need_an_admin_key(
    database: Database, keyed_http: httpx.AsyncClient, owner: asyncpg.Connection
) -> None:
    read, _ = await auth.create_key(database, "default", "read")
    admin, _ = await auth.create_key(database, "default", "admin")
    body = {"source_uri": CONTRACTOR_POLICY, "max_depth": 20}
    for token in (read, admin):
        headers = {"Authorization": f"Bearer {token}"}
        refused = token == read
        answered = await keyed_http.post("/v1/forget", json=body, headers=headers)
        assert answered.status_code == (403 if refused else 200), answered.text
        assert await captured(owner) == set(INCIDENT_TEXTS) - (
            set() if refused else CONTRACTOR_RADIUS
        )
        shown = await keyed_http.get("/v1/tenant/settings", headers=headers)
        changed = await keyed_http.put(
            "/v1/tenant/settings", json={"capture_query_text": False}, headers=headers
        )
        assert (shown.status_code, changed.status_code) == ((403, 403) if refused else (200, 200))
    result = answered.json()
    assert {n["context_id"]: n["kind"] for n in result["affected"]}["chunk_42"] == "chunk"
    assert result["total"] == 8 and len(result["tombstone_ids"]) == 1
    assert shown.json() == {"tenant_id": "default"} | ALL_ON
    assert changed.json()["capture_query_text"] is False
    assert "text_hash_key" not in shown.text + changed.text
    sneaky = await keyed_http.put(
        "/v1/tenant/settings", json={"text_hash_key": "00"}, headers=headers
    )
    assert sneaky.status_code == 422
    [entry] = await audited(owner, "forget")
    assert entry["key_id"] == admin.split("_")[1]
    gone = await keyed_http.post("/v1/forget", json={"source_uri": "s3://nobody"}, headers=headers)
    assert gone.status_code == 404


@pytest.fixture
def cli_env(database_url: str) -> dict[str, str]:
    return {"LINEAGE_DATABASE_URL": database_url, "COLUMNS": "200"}


@pytest.mark.usefixtures("incident")
def test_forget_and_settings_from_the_cli(cli_env: dict[str, str], tmp_path: Path) -> None:
    runner = CliRunner()
    turned = runner.invoke(
        cli.app, ["tenant", "settings", "default", "--no-capture-query-text"], env=cli_env
    )
    assert turned.exit_code == 0, turned.output
    assert "capture_query_text" in turned.output and "off" in turned.output
    out = tmp_path / "forgotten.json"
    args = ["forget", "--source-uri", CONTRACTOR_POLICY, "--output", str(out)]
    done = runner.invoke(cli.app, args, env=cli_env)
    assert done.exit_code == 0, done.output
    assert "chunk_42" in done.output and "8 captured texts purged" in done.output
    listed = json.loads(out.read_text())
    assert {node["context_id"] for node in listed["affected"]} == CONTRACTOR_RADIUS
    again = runner.invoke(cli.app, args, env=cli_env)
    assert again.exit_code == 0 and "nothing left to purge" in again.output
    cut = runner.invoke(cli.app, [*args[:3], "--max-depth", "1"], env=cli_env)
    assert cut.exit_code == 1 and "deeper than max_depth 1" in cut.output
