"""Export bundles and their import: a round trip keeps every walk, and a bundle with a record
missing, added, reordered or altered is refused with nothing written."""

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from typer.testing import CliRunner

from lineage import cli, derive
from lineage.bundle import load
from lineage.bundle.export import export_bundle
from lineage.bundle.load import import_bundle
from lineage.claims.answers import capture_texts
from lineage.core.errors import BundleError, CheckpointError, Conflict, LogIntegrityError
from lineage.db import keyring
from lineage.db.database import Database
from lineage.services import privacy, reads, signing, walks
from lineage.services.auth import Caller
from lineage.services.demo import ANSWER_ID, CONTRACTOR_POLICY, INCIDENT, load_incident
from lineage.services.records import get_records
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from lineage.verifiable_log import merkle, storage
from lineage.verifiable_log.checkpoint import generate_signing_key
from tests.conftest import database_at, janitor, url_for

CHUNK_TEXT = next(item.text for item in INCIDENT if item.context_id == "chunk_42")


@pytest.fixture
async def exported(
    store: PostgresStore,
    database: Database,
    owner_database: Database,
    tmp_path: Path,
) -> Path:
    await load_incident(store)
    await privacy.update_settings(
        database, Caller("default", None, "admin"), {"capture_source_text": True}
    )
    await capture_texts(database, "default", {"chunk_42": CHUNK_TEXT})
    path = tmp_path / "default.bundle"
    written = await export_bundle(owner_database, Settings(), "default", path, include_text=True)
    assert (written.records, written.texts) == (len(INCIDENT), 1)
    return path


def verifier() -> Any:
    return storage.signing_key(Settings()).verifier


def signer() -> keyring.Signer:
    return keyring.signer_for(Settings())


async def walk_views(database: Database, tenant_id: str) -> dict[str, Any]:
    """What the walks answer, without the tenant's name."""
    settings = Settings()

    def plain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(({k: v for k, v in r.items() if k != "tenant_id"} for r in rows), key=str)

    back = await walks.walk_back(database, settings, tenant_id, ANSWER_ID, None)
    radius = await reads.run(
        database, settings, "blast_radius_by_source", tenant_id=tenant_id,
        source_uri=CONTRACTOR_POLICY, kind="all", max_depth=20,
    )  # fmt: skip
    stale = await reads.run(
        database, settings, "stale_sources", tenant_id=tenant_id, source_uri="any", kind="all",
        max_depth=20,
    )  # fmt: skip
    return {
        "walk_back": plain(back.nodes),
        "truncated": back.truncated,
        "blast_radius": plain(radius),
        "stale": plain(stale),
    }


async def test_a_round_trip_keeps_every_walk_text_and_signature(
    exported: Path, database: Database, owner_database: Database
) -> None:
    imported = await import_bundle(owner_database, Settings(), exported, "moved", verifier())
    assert imported.verified.records == imported.tree_size == len(INCIDENT)
    assert imported.verified.signatures_checked == len(INCIDENT)
    assert await walk_views(database, "moved") == await walk_views(database, "default")
    async with database.tenant("moved") as tx:
        connection = tx.connection
        assert await connection.fetchval("SELECT text FROM context_text") == CHUNK_TEXT
        keys = await connection.fetch("SELECT text_hash_key FROM tenant_settings")
        records = await get_records(tx, [str(item.context_id) for item in INCIDENT])
        for record in records.values():
            check = await signing.verify_record(connection, "moved", record, signer())
            assert check.verified, record.context_id
    async with owner_database.connection() as connection:
        both = await connection.fetch(
            "SELECT tenant_id, text_hash_key FROM tenant_settings ORDER BY tenant_id"
        )
    assert both[0]["text_hash_key"] == both[1]["text_hash_key"] == keys[0]["text_hash_key"]


async def test_the_same_tenant_name_elsewhere_has_the_same_log_root(
    exported: Path, template_db: tuple[str, str]
) -> None:

    base, template = template_db
    with janitor(base, "lineage_bundle_target", template):
        async with database_at(url_for(base, "lineage_bundle_target"), as_owner=True) as target:
            imported = await import_bundle(target, Settings(), exported, "default", verifier())
    assert imported.root_hash == imported.verified.checkpoint.root_hash


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def rewrite(path: Path, tamper: Callable[[list[bytes]], list[bytes]]) -> None:
    path.write_bytes(b"".join(tamper(lines_of(path))))


def record_of(line: bytes) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(line)["record"]
    return value


def with_record(line: bytes, record: dict[str, Any], *, rehash: bool) -> bytes:
    """The record line with another record in it, its leaf hash made to match when `rehash`."""
    from lineage.core.record import canonical_json

    value = json.loads(line)
    value["record"] = record
    if rehash:
        value["leaf_hash"] = base64.b64encode(merkle.leaf_hash(canonical_json(record))).decode()
    return json.dumps(value).encode() + b"\n"


def drop_second_record(lines: list[bytes]) -> list[bytes]:
    return [lines[0], lines[1], *lines[3:]]


def add_a_copy(lines: list[bytes]) -> list[bytes]:
    return [*lines[:3], lines[2], *lines[3:]]


def add_a_forged_leaf(lines: list[bytes]) -> list[bytes]:
    last = len(INCIDENT)
    forged = {**record_of(lines[last]), "context_id": "planted"}
    value = json.loads(with_record(lines[last], forged, rehash=True))
    value["leaf_index"] = last
    return [*lines[: last + 1], json.dumps(value).encode() + b"\n", *lines[last + 1 :]]


def swap_two_records(lines: list[bytes]) -> list[bytes]:
    return [lines[0], lines[2], lines[1], *lines[3:]]


def swap_and_renumber(lines: list[bytes]) -> list[bytes]:
    first, second = json.loads(lines[1]), json.loads(lines[2])
    first["leaf_index"], second["leaf_index"] = 1, 0
    return [lines[0], *(json.dumps(v).encode() + b"\n" for v in (second, first)), *lines[3:]]


def alter_a_record(lines: list[bytes]) -> list[bytes]:
    altered = {**record_of(lines[3]), "transform_version": "chunker@9.9"}
    return [*lines[:3], with_record(lines[3], altered, rehash=False), *lines[4:]]


def alter_a_record_and_its_leaf_hash(lines: list[bytes]) -> list[bytes]:
    altered = {**record_of(lines[3]), "transform_version": "chunker@9.9"}
    return [*lines[:3], with_record(lines[3], altered, rehash=True), *lines[4:]]


def pass_a_record_off_as_expired(lines: list[bytes]) -> list[bytes]:
    """Its leaf hash kept and the trailer's counts fixed, so only the signed expiry note the
    bundle lacks can tell."""
    value = json.loads(lines[2])
    context_id = record_of(lines[2])["context_id"]
    expired = {"context_id": context_id, "has_kept_children": False, "root_sources": {}}
    value = {"leaf_index": value["leaf_index"], "leaf_hash": value["leaf_hash"], "expired": expired}
    trailer = json.loads(lines[-1])
    trailer["end"]["expired"] = 1
    return [
        lines[0], lines[1], json.dumps(value).encode() + b"\n", *lines[3:-1],
        json.dumps(trailer).encode() + b"\n",
    ]  # fmt: skip


def cut_short(lines: list[bytes]) -> list[bytes]:
    return lines[:-1]


TAMPERING: dict[str, tuple[Callable[[list[bytes]], list[bytes]], str]] = {
    "missing": (drop_second_record, "leaf 2, expected leaf 1"),
    "added copy": (add_a_copy, "leaf 1, expected leaf 2"),
    "added forged leaf": (add_a_forged_leaf, "more records than"),
    "reordered": (swap_two_records, "leaf 1, expected leaf 0"),
    "reordered and renumbered": (swap_and_renumber, "do not hash to the checkpoint's root"),
    "altered": (alter_a_record, "was altered"),
    "altered and rehashed": (alter_a_record_and_its_leaf_hash, "does not match its signature"),
    "missing, its leaf hash left": (pass_a_record_off_as_expired, "without an expiry note"),
    "cut short": (cut_short, "cut short"),
}


@pytest.mark.parametrize("name", TAMPERING)
async def test_a_tampered_bundle_is_refused_and_nothing_is_written(
    name: str, exported: Path, owner_database: Database, owner: asyncpg.Connection
) -> None:
    tamper, reason = TAMPERING[name]
    rewrite(exported, tamper)
    with pytest.raises(BundleError, match=reason):
        await import_bundle(owner_database, Settings(), exported, "moved", verifier())
    assert await owner.fetchval("SELECT count(*) FROM tenants WHERE tenant_id = 'moved'") == 0


async def test_an_altered_and_rehashed_record_fails_the_root_without_the_keyring(
    exported: Path, database_url: str
) -> None:
    """Without the keyring that signed them, the Merkle root alone catches it."""
    rewrite(exported, alter_a_record_and_its_leaf_hash)
    other_keyring = keyring.KeyringSigner([keyring.new_key()])
    async with database_at(database_url, signer=other_keyring, as_owner=True) as elsewhere:
        with pytest.raises(BundleError, match="do not hash to the checkpoint's root"):
            await import_bundle(elsewhere, Settings(), exported, "moved", verifier())


async def test_a_checkpoint_by_another_key_is_refused(
    exported: Path, owner_database: Database
) -> None:
    stranger = generate_signing_key("lineage").verifier
    with pytest.raises(CheckpointError, match="no signature by key"):
        await import_bundle(owner_database, Settings(), exported, "moved", stranger)


async def test_a_leaf_whose_hash_is_gone_from_the_tree_is_not_exported(
    exported: Path, owner_database: Database, owner: asyncpg.Connection, tmp_path: Path
) -> None:
    await owner.execute("UPDATE log_leaves SET hash = NULL WHERE leaf_index = 2")
    path = tmp_path / "altered.bundle"
    # Found where the tree's frontier is folded from the leaf, else where its record is read.
    gone = r"lacks stored subtrees \[\(0, 2\)\]|leaf 2 of the log of tenant default has no hash"
    with pytest.raises(LogIntegrityError, match=gone):
        await export_bundle(owner_database, Settings(), "default", path, include_text=False)
    assert not path.exists()


async def test_a_tenant_that_holds_records_is_refused(
    exported: Path, owner_database: Database
) -> None:
    with pytest.raises(Conflict, match="already holds records"):
        await import_bundle(owner_database, Settings(), exported, "default", verifier())


def test_the_cli_exports_and_imports(database_url: str, tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"LINEAGE_DATABASE_URL": database_url}
    assert runner.invoke(cli.app, ["demo"], env=env).exit_code == 0
    path = tmp_path / "demo.bundle"
    written = runner.invoke(
        cli.app, ["export", "bundle", "--tenant", "default", "--output", str(path)], env=env
    )
    assert written.exit_code == 0, written.output
    assert json.loads(lines_of(path)[0])["bundle"] == "lineage-tenant"
    loaded = runner.invoke(cli.app, ["import", str(path), "--tenant", "copy"], env=env)
    assert loaded.exit_code == 0, loaded.output
    summary = json.loads(loaded.stdout)
    assert summary["tenant_id"] == "copy" and summary["records"] == summary["tree_size"] > 10
    rewrite(path, alter_a_record)
    refused = runner.invoke(cli.app, ["import", str(path), "--tenant", "copy2"], env=env)
    assert refused.exit_code == 1 and "was altered" in refused.output


async def test_a_log_that_lists_a_child_before_its_parent_still_imports(
    store: PostgresStore,
    database: Database,
    owner: asyncpg.Connection,
    owner_database: Database,
    tmp_path: Path,
) -> None:
    """Leaf order need not put parents first (records logged by migration 0003 were queued by
    time, then id): the import holds a record back until its parent is written."""
    doc = await derive(store, [], "a doc", "document", source_uri="s3://x", context_id="doc_1")
    await derive(store, [doc], "a chunk", "chunk", "chunker", "1", context_id="chunk_1")
    # Queued in append order by lineage_append; requeued child first.
    await owner.execute(
        "UPDATE events SET context_id = CASE context_id WHEN 'doc_1' THEN 'chunk_1' "
        "ELSE 'doc_1' END WHERE tenant_id = 'default'"
    )
    path = tmp_path / "reversed.bundle"
    await export_bundle(owner_database, Settings(), "default", path, include_text=False)
    assert [record_of(line)["context_id"] for line in lines_of(path)[1:3]] == ["chunk_1", "doc_1"]
    imported = await import_bundle(owner_database, Settings(), path, "moved", verifier())
    assert imported.verified.records == imported.tree_size == 2
    back = await walks.walk_back(database, Settings(), "moved", "chunk_1", None)
    assert [node["context_id"] for node in back.nodes] == ["chunk_1", "doc_1"]


async def test_captured_text_of_the_last_records_imports_past_a_batch_of_texts(
    store: PostgresStore,
    database: Database,
    owner_database: Database,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Texts come after every leaf, a batch at a time: each batch is written once every record
    is in, the records of the last, partial batch too."""
    await load_incident(store)
    switches = ("capture_source_text", "capture_query_text", "capture_answer_text")
    await privacy.update_settings(
        database, Caller("default", None, "admin"), dict.fromkeys(switches, True)
    )
    texts = {str(item.context_id): item.text for item in INCIDENT}
    await capture_texts(database, "default", texts)
    path = tmp_path / "texts.bundle"
    await export_bundle(owner_database, Settings(), "default", path, include_text=True)
    monkeypatch.setattr(load, "BATCH_RECORDS", 2)  # 11 records: the last batch holds answer_1
    imported = await import_bundle(owner_database, Settings(), path, "moved", verifier())
    assert imported.verified.texts == len(INCIDENT)
    async with database.tenant("moved") as tx:
        rows = await tx.connection.fetch("SELECT context_id, text FROM context_text")
    assert {row["context_id"]: row["text"] for row in rows} == texts
