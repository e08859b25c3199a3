"""A bundle exported after retention expired a month: the expired records' leaves travel as
their hashes only, named in an expiry note signed by the log's key; the import verifies every
leaf against the checkpoint and writes the kept records, and a bundle that passes a kept record
off as expired, or changes what expired, is refused."""

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from typer.testing import CliRunner

from lineage import cli
from lineage.bundle.export import export_bundle
from lineage.bundle.load import import_bundle
from lineage.core.errors import BundleError, CheckpointError
from lineage.db.database import Database
from lineage.services import retention, walks
from lineage.settings import Settings
from lineage.verifiable_log import storage
from lineage.verifiable_log.checkpoint import generate_signing_key
from tests.test_bundle import lines_of, rewrite, verifier
from tests.test_retention import NEW_RECORDS, OLD_RECORDS, append

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
    assert summary["signatures_checked"] == 2 and summary["expired_before"] is not None
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
    assert checked.expired_parents == {"chunk_old"}
    walked = await walks.walk_back(database, Settings(), "moved", "answer_new", None)
    assert walked.truncated_reason == "retention"  # its parent chunk_old expired
    plain = [{k: v for k, v in node.items() if k != "tenant_id"} for node in walked.nodes]
    assert plain == [{k: v for k, v in node.items() if k != "tenant_id"} for node in original]
    horizons = await owner.fetch("SELECT tenant_id, expired_before FROM tenant_expiry ORDER BY 1")
    assert [row["tenant_id"] for row in horizons] == ["default", "moved"]
    assert horizons[0]["expired_before"] == horizons[1]["expired_before"] == checked.expired_before


def swap_a_kept_record_for_its_hash(lines: list[bytes]) -> list[bytes]:
    """answer_new passed off as expired: the root still matches, the expiry note must not."""
    out = []
    for line in lines:
        value = json.loads(line)
        if value.get("record", {}).get("context_id") != "answer_new":
            out.append(line)
            continue
        expired = {"context_id": "answer_new", "has_kept_children": False}
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
