"""A bundle exported after retention expired a month: the expired records' leaves travel as
their hashes only, named in an expiry note signed by the log's key; the import verifies every
leaf against the checkpoint and writes the kept records, and a bundle that passes a kept record
off as expired, or changes what expired, is refused."""

import base64
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from typer.testing import CliRunner

from lineage import cli
from lineage.bundle import format as bundle
from lineage.bundle.export import export_bundle
from lineage.bundle.load import import_bundle
from lineage.core.errors import BundleError, CheckpointError, LogIntegrityError
from lineage.db.database import Database
from lineage.services import reads, retention, walks
from lineage.services.auth import Caller
from lineage.services.forget import forget
from lineage.services.records import record_from_row
from lineage.settings import Settings
from lineage.verifiable_log import storage
from lineage.verifiable_log.checkpoint import generate_signing_key
from tests.test_bundle import lines_of, rewrite, signer, verifier
from tests.test_retention import NEW_RECORDS, NOW, OLD_RECORDS, append, record

EXPIRED = [record.context_id for record in OLD_RECORDS]  # doc_old, chunk_old, tomb_old
KEPT = [record.context_id for record in NEW_RECORDS]  # answer_new (child of chunk_old), doc_new


@pytest.fixture
async def expired_bundle(
    database: Database, owner_database: Database, tmp_path: Path
) -> tuple[Path, list[Any]]:
    """The default tenant's bundle once its oldest month expired; the walk back from
    answer_new there, before any import."""
    await retention.set_policy(owner_database, 12)  # month partitions before the records
    await append(database, OLD_RECORDS)
    await append(database, NEW_RECORDS)
    await storage.checkpoint(database, Settings(), "default")  # logged, as the service does
    await retention.apply(database)
    path = tmp_path / "expired.bundle"
    written = await export_bundle(owner_database, Settings(), "default", path, include_text=False)
    assert (written.records, written.expired, written.tree_size) == (2, 3, 5)
    walked = await walks.walk_back(database, Settings(), "default", "answer_new", None)
    return path, walked.nodes


def leaf_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines_of(path)[1:-1]]


def test_the_cli_imports_a_bundle_exported_after_expiry(
    expired_bundle: tuple[Path, list[Any]], database_url: str, tmp_path: Path
) -> None:
    path, _ = expired_bundle
    leaves = leaf_lines(path)
    assert [leaf["expired"]["context_id"] for leaf in leaves if "expired" in leaf] == EXPIRED
    assert all("record" not in leaf for leaf in leaves if "expired" in leaf)  # hashes only
    assert [leaf["record"]["context_id"] for leaf in leaves if "record" in leaf] == KEPT
    by_id = {leaf["expired"]["context_id"]: leaf["expired"] for leaf in leaves if "expired" in leaf}
    assert [cid for cid, leaf in by_id.items() if leaf["has_kept_children"]] == ["chunk_old"]
    trailer = json.loads(lines_of(path)[-1])
    assert trailer["end"] == {"records": 5, "texts": 0, "expired": 3}
    assert trailer["expiry"].startswith("lineage bundle expiry\n")

    runner = CliRunner()
    loaded = runner.invoke(
        cli.app,
        ["import", str(path), "--tenant", "moved"],
        env={"LINEAGE_DATABASE_URL": database_url},
    )
    assert loaded.exit_code == 0, loaded.output
    summary = json.loads(loaded.stdout)
    assert (summary["records"], summary["expired"], summary["tree_size"]) == (2, 3, 2)
    assert summary["signatures_checked"] == 3 and summary["expired_before"] is not None
    assert summary["tombstones"] == 1  # tomb_old, kept past retention, carried whole
    assert "3 expired before the export" in loaded.stderr


async def test_the_imported_tenant_walks_as_the_original_and_knows_what_expired(
    expired_bundle: tuple[Path, list[Any]],
    owner_database: Database,
    database: Database,
    owner: asyncpg.Connection,
) -> None:
    path, original = expired_bundle
    imported = await import_bundle(owner_database, Settings(), path, "moved", verifier())
    checked = imported.verified
    assert (checked.records, checked.expired, imported.tree_size) == (2, 3, 2)
    assert checked.expired_parents == {"chunk_old": {"s3://old.md": 1}}
    walked = await walks.walk_back(database, Settings(), "moved", "answer_new", None)
    assert walked.truncated_reason == "retention"  # its parent chunk_old expired
    plain = [{k: v for k, v in node.items() if k != "tenant_id"} for node in walked.nodes]
    assert plain == [{k: v for k, v in node.items() if k != "tenant_id"} for node in original]
    horizons = await owner.fetch("SELECT tenant_id, expired_before FROM tenant_expiry ORDER BY 1")
    assert [row["tenant_id"] for row in horizons] == ["default", "moved"]
    assert horizons[0]["expired_before"] == horizons[1]["expired_before"] == checked.expired_before


async def root_sources_of(owner: asyncpg.Connection, tenant_id: str) -> list[tuple[Any, ...]]:
    """Each record's root sources as it keeps them, checked against the postings by source."""
    kept = await owner.fetch(
        "SELECT p.context_id, substr(k.key, length('source:') + 1), r.depth "
        "FROM provenance AS p "
        "CROSS JOIN LATERAL unnest(p.root_sources, p.root_depths) AS r (key_no, depth) "
        "JOIN invalidation_keys AS k ON k.tenant_id = p.tenant_id AND k.key_no = r.key_no "
        "WHERE p.tenant_id = $1 ORDER BY 1, 2",
        tenant_id,
    )
    posted = await owner.fetch(
        "SELECT posting.context_id, substr(k.key, length('source:') + 1), ip.depth "
        "FROM invalidation_postings AS ip "
        "CROSS JOIN LATERAL unnest(ip.context_uuids::text[] || ip.context_ids) "
        "AS posting (context_id) "
        "JOIN invalidation_keys AS k ON k.tenant_id = ip.tenant_id AND k.key_no = ip.key_no "
        "WHERE ip.tenant_id = $1 AND k.key LIKE 'source:%' ORDER BY 1, 2",
        tenant_id,
    )
    assert [tuple(row) for row in posted] == [tuple(row) for row in kept]
    return [tuple(row) for row in kept]


async def by_source(database: Database, tenant_id: str, source_uri: str) -> list[Any]:
    nodes = await reads.run(
        database, Settings(), "blast_radius_by_source",
        tenant_id=tenant_id, source_uri=source_uri, kind="all", max_depth=20,
    )  # fmt: skip
    return [{k: v for k, v in node.items() if k != "tenant_id"} for node in nodes]


async def test_a_kept_record_whose_parent_expired_keeps_its_root_sources(
    database: Database, owner_database: Database, owner: asyncpg.Connection, tmp_path: Path
) -> None:
    """The expired chunk_old carries the root sources its kept children inherited from it, so
    blast radius by source_uri finds them in the imported tenant as in the original; answer_two
    also derives from the kept doc_new, whose source it must not pass on to answer_new."""
    await retention.set_policy(owner_database, 12)
    await append(database, OLD_RECORDS)
    await append(database, NEW_RECORDS)
    both = record("answer_two", "answer", NOW, parent_ids=["chunk_old", "doc_new"])
    await append(database, [both])
    await storage.checkpoint(database, Settings(), "default")
    await retention.apply(database)
    path = tmp_path / "expired.bundle"
    await export_bundle(owner_database, Settings(), "default", path, include_text=False)
    [chunk] = [
        leaf for leaf in leaf_lines(path) if leaf.get("expired", {}).get("has_kept_children")
    ]
    assert chunk["expired"]["root_sources"] == {"s3://old.md": 1}

    await import_bundle(owner_database, Settings(), path, "moved", verifier())

    original = await root_sources_of(owner, "default")
    assert original == [
        ("answer_new", "s3://old.md", 2),
        ("answer_two", "s3://new.md", 1),
        ("answer_two", "s3://old.md", 2),
        ("doc_new", "s3://new.md", 0),
    ]
    assert await root_sources_of(owner, "moved") == original
    for source_uri in ("s3://old.md", "s3://new.md"):
        found = await by_source(database, "default", source_uri)
        assert found and await by_source(database, "moved", source_uri) == found


def as_version_2(lines: list[bytes]) -> list[bytes]:
    """The bundle as version 2 wrote it: no root sources or tombstones, an expiry note over ids
    alone."""
    header, trailer = json.loads(lines[0]), json.loads(lines[-1])
    header["version"] = 2
    leaves, expired = [], bundle.ExpiredLeaves()
    for line in lines[1:-1]:
        value = json.loads(line)
        if "expired" not in value:
            leaves.append(line)
            continue
        del value["expired"]["root_sources"]
        value.pop("tombstone", None), value.pop("signature", None)
        expired.add(value["leaf_index"], value["expired"]["context_id"], None)
        leaves.append(json.dumps(value).encode() + b"\n")
    text = trailer["expiry"].split("\n\n")[0] + "\n"
    before = datetime.fromisoformat(text.rstrip("\n").rpartition("\nbefore ")[2])
    checkpoint = verifier().open(header["checkpoint"])
    trailer["expiry"] = storage.signing_key(Settings()).sign_text(expired.text(checkpoint, before))
    return [json.dumps(header).encode() + b"\n", *leaves, json.dumps(trailer).encode() + b"\n"]


async def test_a_version_2_bundle_still_imports(
    expired_bundle: tuple[Path, list[Any]], owner_database: Database, database: Database
) -> None:
    path, _ = expired_bundle
    rewrite(path, as_version_2)
    imported = await import_bundle(owner_database, Settings(), path, "moved", verifier())
    assert imported.verified.header.version == 2
    assert imported.verified.expired_parents == {"chunk_old": {}}  # it carried no root sources
    walked = await walks.walk_back(database, Settings(), "moved", "answer_new", None)
    assert [node["context_id"] for node in walked.nodes] == ["answer_new"]


async def test_a_forget_tombstone_kept_past_retention_travels_and_its_forget_holds(
    expired_bundle: tuple[Path, list[Any]], owner_database: Database, database: Database
) -> None:
    """tomb_old, the forget tombstone of doc_old's chunk, expired with its month but was kept in
    forget_tombstones: the bundle carries it whole, the import writes it there under the new
    tenant, signed by this service, and forgetting the document again answers as it does in the
    original (nothing left to do)."""
    path, _ = expired_bundle
    [line] = [leaf for leaf in leaf_lines(path) if "tombstone" in leaf]
    assert line["expired"]["context_id"] == line["tombstone"]["context_id"] == "tomb_old"
    imported = await import_bundle(owner_database, Settings(), path, "moved", verifier())
    assert imported.verified.tombstones == 1

    kept = {}
    for tenant_id in ("default", "moved"):
        async with database.tenant(tenant_id) as tx:
            [row] = await tx.connection.fetch("SELECT * FROM forget_tombstones")
        kept[tenant_id] = record_from_row(row)
        assert signer().verify(row["key_id"], kept[tenant_id].canonical_bytes(), row["signature"])
    assert kept["moved"] == kept["default"].model_copy(update={"tenant_id": "moved"})

    answers = []
    for tenant_id in ("default", "moved"):
        caller = Caller(tenant_id, None, "admin")
        forgotten = (await forget(database, Settings(), caller, "s3://old.md")).model_dump()
        answers.append({k: v for k, v in forgotten.items() if k != "forgotten_at"})
    assert answers[0]["nothing_left"] and answers[0]["affected"]
    assert answers[1] == answers[0]


def alter_a_tombstone(lines: list[bytes]) -> list[bytes]:
    kept, altered = b'"source_uri_hash":"hmacsha256:00"', b'"source_uri_hash":"hmacsha256:01"'
    return [line.replace(kept, altered) for line in lines]


def drop_a_tombstone(lines: list[bytes]) -> list[bytes]:
    out = []
    for line in lines:
        value = json.loads(line)
        if "tombstone" not in value:
            out.append(line)
            continue
        value.pop("tombstone"), value.pop("signature")
        out.append(json.dumps(value).encode() + b"\n")
    return out


def alter_an_expired_records_root_sources(lines: list[bytes]) -> list[bytes]:
    return [line.replace(b'{"s3://old.md": 1}', b'{"s3://other.md": 1}') for line in lines]


def swap_a_kept_record_for_its_hash(lines: list[bytes]) -> list[bytes]:
    """answer_new passed off as expired: the root still matches, the expiry note must not."""
    out = []
    for line in lines:
        value = json.loads(line)
        if value.get("record", {}).get("context_id") != "answer_new":
            out.append(line)
            continue
        expired = {"context_id": "answer_new", "has_kept_children": False, "root_sources": {}}
        swapped = {"leaf_index": value["leaf_index"], "leaf_hash": value["leaf_hash"]}
        out.append(json.dumps({**swapped, "expired": expired}).encode() + b"\n")
    return _recount(out)


def _recount(lines: list[bytes]) -> list[bytes]:
    """The trailer's counts made to match what the lines now hold (a careful forger)."""
    trailer = json.loads(lines[-1])
    trailer["end"]["expired"] = sum(b'"expired": {' in line for line in lines[1:-1])
    return [*lines[:-1], json.dumps(trailer).encode() + b"\n"]


def rename_an_expired_record(lines: list[bytes]) -> list[bytes]:
    return [
        line.replace(b'"context_id": "doc_old"', b'"context_id": "doc_other"') for line in lines
    ]


def alter_an_expired_leaf_hash(lines: list[bytes]) -> list[bytes]:
    value = json.loads(lines[1])
    value["leaf_hash"] = base64.b64encode(bytes(32)).decode()
    return [lines[0], json.dumps(value).encode() + b"\n", *lines[2:]]


def drop_the_expiry_note(lines: list[bytes]) -> list[bytes]:
    trailer = json.loads(lines[-1])
    trailer["expiry"] = None
    return [*lines[:-1], json.dumps(trailer).encode() + b"\n"]


def sign_the_expiry_note_with_another_key(lines: list[bytes]) -> list[bytes]:
    trailer = json.loads(lines[-1])
    text = trailer["expiry"].split("\n\n")[0] + "\n"
    trailer["expiry"] = generate_signing_key("lineage").sign_text(text)
    return [*lines[:-1], json.dumps(trailer).encode() + b"\n"]


def drop_an_expired_leaf(lines: list[bytes]) -> list[bytes]:
    return [lines[0], *lines[2:]]


TAMPERING: dict[str, tuple[Callable[[list[bytes]], list[bytes]], type[Exception], str]] = {
    "a kept record passed off as expired": (
        swap_a_kept_record_for_its_hash, BundleError, "does not name the 4 expired leaves"
    ),
    "an expired record renamed": (rename_an_expired_record, BundleError, "does not name the"),
    "an expired tombstone altered": (alter_a_tombstone, BundleError, "was altered"),
    "an expired tombstone dropped": (drop_a_tombstone, BundleError, "does not name the"),
    "an expired record's root sources altered": (
        alter_an_expired_records_root_sources, BundleError, "does not name the"
    ),
    "an expired leaf's hash altered": (
        alter_an_expired_leaf_hash, BundleError, "do not hash to the checkpoint's root"
    ),
    "an expired leaf dropped": (drop_an_expired_leaf, BundleError, "expected leaf 0"),
    "the expiry note dropped": (drop_the_expiry_note, BundleError, "without an expiry note"),
    "the expiry note signed by another key": (
        sign_the_expiry_note_with_another_key, CheckpointError, "no signature by key"
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", TAMPERING)
async def test_a_tampered_bundle_exported_after_expiry_is_refused(
    name: str,
    expired_bundle: tuple[Path, list[Any]],
    owner_database: Database,
    owner: asyncpg.Connection,
) -> None:
    tamper, error, reason = TAMPERING[name]
    path, _ = expired_bundle
    rewrite(path, tamper)
    with pytest.raises(error, match=reason):
        await import_bundle(owner_database, Settings(), path, "moved", verifier())
    assert await owner.fetchval("SELECT count(*) FROM tenants WHERE tenant_id = 'moved'") == 0


async def test_a_record_removed_after_the_horizon_is_not_exported_as_expired(
    database: Database, owner_database: Database, owner: asyncpg.Connection, tmp_path: Path
) -> None:
    """Retention drops what was created before the horizon: a record of this month gone from
    the store was removed around the service, and the export refuses to call it expired."""
    await retention.set_policy(owner_database, 12)
    await append(database, [*OLD_RECORDS, *NEW_RECORDS])
    await storage.checkpoint(database, Settings(), "default")
    await retention.apply(database)
    await owner.execute("ALTER TABLE provenance DISABLE TRIGGER provenance_append_only")
    await owner.execute("DELETE FROM provenance WHERE context_id = 'doc_new'")
    await owner.execute("ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_append_only")
    path = tmp_path / "altered.bundle"
    with pytest.raises(LogIntegrityError, match=f"record doc_new .* created {NOW:%Y-%m-%d}"):
        await export_bundle(owner_database, Settings(), "default", path, include_text=False)
    assert not path.exists()
