"""Signed records on a real PostgreSQL: the keyring file, sign and verify, rotation, a row
altered by the superuser (through the API and the CLI), an unsigned row, and `lineage selftest`
on a throwaway database it must leave behind no trace of."""

import asyncio
import json
import re
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import psycopg
import pytest
from typer.testing import CliRunner, Result

from lineage import cli
from lineage.api.app import create_app
from lineage.core.derive import Derivation, derive, derive_many
from lineage.core.errors import SigningKeyError, UnknownSigningKey
from lineage.db.database import Database
from lineage.db.keyring import (
    KEYRING_NAME,
    KeyringSigner,
    Signer,
    keyring_path,
    load_keyring,
    rotate_keyring,
    signer_for,
)
from lineage.services import selftest, signing
from lineage.services.records import get_records
from lineage.services.signing import SignatureCheck
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.conftest import database_at

TENANT = "default"


@pytest.fixture
def keyring(tmp_path: Path) -> Path:
    return tmp_path / "keys" / "signing-keys.json"


@pytest.fixture
def signer(keyring: Path) -> KeyringSigner:
    return load_keyring(keyring, create=True)


@pytest.fixture
async def api(database_url: str, keyring: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(statement_timeout_ms=5000, auth="none", signing_keys_file=keyring)
    app = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as client:
            yield client


async def check(database: Database, context_id: str, signer: Signer) -> SignatureCheck:
    async with database.tenant(TENANT) as tx:
        record = (await get_records(tx, [context_id]))[context_id]
        return await signing.verify_record(tx.connection, TENANT, record, signer)


async def alter_as_superuser(owner: asyncpg.Connection, context_id: str) -> None:
    """What someone holding the database's superuser password can do behind the service."""
    async with owner.transaction():
        await owner.execute("ALTER TABLE provenance DISABLE TRIGGER provenance_append_only")
        await owner.execute(
            """UPDATE provenance SET attributes = '{"altered": true}' WHERE context_id = $1""",
            context_id,
        )
        await owner.execute("ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_append_only")


def run_cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(cli.app, list(args), env={"COLUMNS": "200", **env})


# --- the keyring file --------------------------------------------------------------------------


def test_the_keyring_is_made_once_private_and_then_reused(keyring: Path) -> None:
    first = load_keyring(keyring, create=True)
    assert stat.S_IMODE(keyring.stat().st_mode) == 0o600
    [key] = json.loads(keyring.read_text())["keys"]
    assert key["key_id"] == first.current_key_id
    assert len(first.keys[0].secret) == 32
    assert load_keyring(keyring, create=False).current_key_id == first.current_key_id
    assert [p.name for p in keyring.parent.iterdir()] == [keyring.name], "a draft was left"


def test_a_keyring_open_to_others_missing_or_malformed_is_refused(
    keyring: Path, tmp_path: Path
) -> None:
    with pytest.raises(SigningKeyError, match=r"no signing keyring at .*signing-key rotate"):
        load_keyring(keyring, create=False)
    load_keyring(keyring, create=True)
    keyring.chmod(0o644)
    with pytest.raises(SigningKeyError, match=r"open to other users .*chmod 600"):
        load_keyring(keyring, create=False)
    keyring.chmod(0o600)
    keyring.write_text('{"keys": [{"key_id": "k1", "secret": "c2hvcnQ=", "created_at": "x"}]}')
    with pytest.raises(SigningKeyError, match="5-byte secret; at least 32"):
        load_keyring(keyring, create=False)
    keyring.write_text("not json")
    with pytest.raises(SigningKeyError, match="is not a signing keyring"):
        load_keyring(keyring, create=False)


def test_rotation_appends_a_newer_key_and_keeps_the_file_private(keyring: Path) -> None:
    first = rotate_keyring(keyring)  # no keyring yet: rotating makes one
    second = rotate_keyring(keyring)
    assert stat.S_IMODE(keyring.stat().st_mode) == 0o600
    rotated = load_keyring(keyring, create=False)
    assert [key.key_id for key in rotated.keys] == [first.key_id, second.key_id]
    assert rotated.current_key_id == second.key_id != first.key_id
    assert [p.name for p in keyring.parent.iterdir()] == [keyring.name]


def test_sign_and_verify_round_trip(signer: KeyringSigner, tmp_path: Path) -> None:
    key_id, signature = signer.sign(b"record bytes")
    assert key_id == signer.current_key_id and len(signature) == 32
    assert signer.verify(key_id, b"record bytes", signature)
    assert not signer.verify(key_id, b"record bytez", signature)
    assert not signer.verify(key_id, b"record bytes", bytes(32))
    with pytest.raises(UnknownSigningKey):
        signer.verify("hmac-0000000000000000", b"record bytes", signature)
    stranger = load_keyring(tmp_path / "stranger.json", create=True)
    with pytest.raises(UnknownSigningKey):
        stranger.verify(key_id, b"record bytes", signature)


# --- signatures in the database ----------------------------------------------------------------


async def test_appended_records_are_signed_once_with_the_current_key(
    database_url: str, database: Database, owner: asyncpg.Connection, signer: KeyringSigner
) -> None:
    async with database_at(database_url, signer=signer) as signing_with_it:
        store = PostgresStore(signing_with_it, TENANT)
        items = [
            Derivation([], f"document {i}", "document", source_uri=f"s3://d{i}") for i in range(3)
        ]
        made = await derive_many(store, items)
        chunk = await derive(store, [made[0]], "chunk", "chunk", "chunker", "1")
        rows = await owner.fetch(
            "SELECT context_id, key_id, signature FROM provenance WHERE signature IS NOT NULL"
        )
        assert {r["context_id"] for r in rows} == {c.context_id for c in [*made, chunk]}
        for row in rows:
            assert row["key_id"] == signer.current_key_id
            assert await check(database, row["context_id"], signer) == SignatureCheck(
                signed=True, verified=True, key_id=signer.current_key_id, reason="ok"
            )
        # A replay inserts nothing, so it signs nothing (a signature is written with its row).
        again = await derive(
            store, [], "document 0", "document", source_uri="s3://d0", deterministic=True
        )
        replay = await derive(
            store, [], "document 0", "document", source_uri="s3://d0", deterministic=True
        )
    assert replay.context_id == again.context_id
    signed = "SELECT count(*) FROM provenance WHERE signature IS NOT NULL"
    assert await owner.fetchval(signed) == len(rows) + 1


async def test_rotation_signs_new_records_with_the_new_key_and_old_ones_still_verify(
    database_url: str, database: Database, keyring: Path, signer: KeyringSigner, tmp_path: Path
) -> None:
    first_key = signer.current_key_id
    async with database_at(database_url, signer=signer) as signing_with_it:
        old = await derive(PostgresStore(signing_with_it, TENANT), [], "old", "document",
                           source_uri="s3://o")  # fmt: skip
    added = rotate_keyring(keyring)
    rotated = load_keyring(keyring, create=False)
    assert [k.key_id for k in rotated.keys] == [first_key, added.key_id]
    assert rotated.current_key_id == added.key_id != first_key

    async with database_at(database_url, signer=rotated) as signing_with_it:
        new = await derive(PostgresStore(signing_with_it, TENANT), [], "new", "document",
                           source_uri="s3://n")  # fmt: skip
    assert await check(database, old.context_id, rotated) == SignatureCheck(
        signed=True, verified=True, key_id=first_key, reason="ok"
    )
    assert await check(database, new.context_id, rotated) == SignatureCheck(
        signed=True, verified=True, key_id=added.key_id, reason="ok"
    )
    # The pre-rotation signer never heard of the new key; another keyring knows neither.
    assert (await check(database, new.context_id, signer)).reason == "unknown_key"
    stranger = load_keyring(tmp_path / "stranger.json", create=True)
    assert await check(database, old.context_id, stranger) == SignatureCheck(
        signed=True, verified=False, key_id=first_key, reason="unknown_key"
    )


async def test_a_database_given_no_signer_signs_with_the_keyring_its_settings_name(
    database: Database, isolated_data_dir: Path
) -> None:
    made = await derive(PostgresStore(database), [], "plain", "document", source_uri="s3://plain")
    assert keyring_path(database.settings) == isolated_data_dir / KEYRING_NAME
    default = signer_for(database.settings)
    assert await check(database, made.context_id, default) == SignatureCheck(
        signed=True, verified=True, key_id=default.current_key_id, reason="ok"
    )


async def test_a_row_altered_by_the_superuser_verifies_false_in_the_api_and_the_cli(
    api: httpx.AsyncClient,
    owner: asyncpg.Connection,
    database_url: str,
    keyring: Path,
) -> None:
    appended = await api.post(
        "/v1/contexts", json={"kind": "document", "text": "policy", "source_uri": "s3://p"}
    )
    assert appended.status_code == 201, appended.text
    context_id = appended.json()["context_id"]
    batch = await api.post(
        "/v1/contexts/batch",
        json={"records": [{"kind": "chunk", "text": "c", "parent_ids": [context_id]}]},
    )
    assert batch.status_code == 201, batch.text
    [chunk] = batch.json()["results"]
    key_id = load_keyring(keyring, create=False).current_key_id
    env = {"LINEAGE_DATABASE_URL": database_url, "LINEAGE_SIGNING_KEYS_FILE": str(keyring)}

    plain = (await api.get(f"/v1/contexts/{context_id}")).json()
    assert "signature" not in plain
    for shown in (context_id, chunk["record"]["context_id"]):
        body = (await api.get(f"/v1/contexts/{shown}", params={"verify": "true"})).json()
        assert body["signature"] == {
            "signed": True, "verified": True, "key_id": key_id, "reason": "ok",
        }  # fmt: skip
    intact = await asyncio.to_thread(run_cli, env, "verify-record", context_id)
    assert intact.exit_code == 0, intact.output
    assert f"signed true, verified true, key {key_id}, reason ok" in intact.output

    await alter_as_superuser(owner, context_id)
    body = (await api.get(f"/v1/contexts/{context_id}", params={"verify": "true"})).json()
    assert body["attributes"] == {"altered": True}
    assert body["signature"] == {
        "signed": True, "verified": False, "key_id": key_id, "reason": "mismatch",
    }  # fmt: skip
    altered = await asyncio.to_thread(
        run_cli, env, "verify-record", context_id, "--tenant", TENANT, "--format", "json"
    )
    assert altered.exit_code == 1, altered.output
    assert json.loads(altered.stdout) == {
        "context_id": context_id, "signed": True, "verified": False, "key_id": key_id,
        "reason": "mismatch",
    }  # fmt: skip


async def test_a_row_inserted_behind_the_service_reports_unsigned(
    api: httpx.AsyncClient, owner: asyncpg.Connection, database_url: str, keyring: Path
) -> None:
    await owner.execute(
        """INSERT INTO provenance (tenant_id, context_id, parent_ids, kind, source_uri,
                                  content_hash, created_at)
           VALUES ('default', 'smuggled', '{}', 'document', 's3://s', $1, now())""",
        "sha256:" + "ab" * 32,
    )
    body = (await api.get("/v1/contexts/smuggled", params={"verify": "true"})).json()
    assert body["signature"] == {
        "signed": False, "verified": False, "key_id": None, "reason": "unsigned",
    }  # fmt: skip
    env = {"LINEAGE_DATABASE_URL": database_url, "LINEAGE_SIGNING_KEYS_FILE": str(keyring)}
    result = await asyncio.to_thread(run_cli, env, "verify-record", "smuggled")
    assert result.exit_code == 1
    assert "signed false, verified false, key -, reason unsigned" in result.output
    missing = await asyncio.to_thread(run_cli, env, "verify-record", "ctx_nope")
    assert missing.exit_code == 1 and "no context ctx_nope" in missing.output
    absent = (await api.get("/v1/contexts/ctx_nope", params={"verify": "true"})).status_code
    assert absent == 404


# --- lineage selftest --------------------------------------------------------------------------


def databases(database_url: str) -> set[str]:
    with psycopg.connect(database_url) as connection:
        return {row[0] for row in connection.execute("SELECT datname FROM pg_database")}


def selftest_databases(database_url: str) -> set[str]:
    return {name for name in databases(database_url) if name.startswith("lineage_selftest_")}


def throwaway_name(output: str) -> str:
    found = re.search(r"created throwaway database (lineage_selftest_[0-9a-f]{12})", output)
    assert found, output
    return found.group(1)


def test_selftest_runs_the_whole_cycle_and_leaves_no_database(
    database_url: str, tmp_path: Path
) -> None:
    before = selftest_databases(database_url)
    result = run_cli(
        {"LINEAGE_DATABASE_URL": database_url, "LINEAGE_DATA_DIR": str(tmp_path)}, "selftest"
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line[0] for line in lines] == ["✓"] * 9, result.output
    for step in ("migrated", "derive()", "signed it with key", "read it back", "verified: true",
                 "altered its row", "reason mismatch", "dropped database"):  # fmt: skip
        assert any(step in line for line in lines), (step, result.output)
    assert throwaway_name(result.output) not in databases(database_url)
    assert selftest_databases(database_url) <= before
    with psycopg.connect(database_url) as configured:
        assert configured.execute("SELECT count(*) FROM provenance").fetchone() == (0,)


def test_selftest_drops_its_database_when_a_step_fails(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_migration(url: str) -> None:
        raise RuntimeError("migration broke")

    monkeypatch.setattr(selftest, "migrate", broken_migration)
    result = run_cli(
        {"LINEAGE_DATABASE_URL": database_url, "LINEAGE_DATA_DIR": str(tmp_path)}, "selftest"
    )
    assert result.exit_code == 1
    assert "✗ RuntimeError: migration broke" in result.output
    assert f"✓ dropped database {throwaway_name(result.output)}" in result.output
    assert throwaway_name(result.output) not in databases(database_url)


class BlindSigner(KeyringSigner):
    """A verifier that passes everything: the selftest must catch it."""

    def verify(self, key_id: str, data: bytes, signature: bytes) -> bool:
        return True


def test_selftest_fails_when_the_alteration_goes_unnoticed(
    database_url: str, keyring: Path
) -> None:
    steps: list[tuple[bool, str]] = []
    blind = BlindSigner(load_keyring(keyring, create=True).keys)
    assert not selftest.run_selftest(
        Settings(), database_url, blind, lambda ok, text: steps.append((ok, text))
    )
    failed = [text for ok, text in steps if not ok]
    assert failed == [
        "the altered record reports verified=True, reason ok; it must report false, mismatch"
    ]
    assert steps[-1][1].startswith("dropped database lineage_selftest_")
    assert throwaway_name("\n".join(text for _, text in steps)) not in databases(database_url)
