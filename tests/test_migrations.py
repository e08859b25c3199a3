"""Schema by migration only: migrating from empty gives the checked-in schema.sql, and the
newest revision downgrades cleanly and upgrades again."""

import difflib
import hashlib
import subprocess
import uuid
from pathlib import Path

import asyncpg
import pytest

from lineage.core.record import NewContext
from lineage.db.migrate import downgrade, migrate
from lineage.db.schema_dump import REGENERATE, SCHEMA_FILE, dump
from lineage.services.demo import load_incident
from lineage.store.postgres import PostgresStore


def test_migrating_from_empty_gives_the_checked_in_schema(database_url: str) -> None:
    """Tables, functions with their bodies, policies, grants and triggers: all in schema.sql."""
    migrated = dump(database_url)
    checked_in = SCHEMA_FILE.read_text()
    if migrated != checked_in:
        diff = "".join(
            difflib.unified_diff(
                checked_in.splitlines(keepends=True),
                migrated.splitlines(keepends=True),
                "lineage/sql/schema/schema.sql (checked in)",
                "the database migrated from empty",
            )
        )
        pytest.fail(
            f"the migrations give another schema than lineage/sql/schema/schema.sql; if the "
            f"migration is meant, run `{REGENERATE}` and commit the file:\n{diff}",
            pytrace=False,
        )


async def test_downgrade_then_upgrade_restores_the_schema(
    database_url: str, owner: asyncpg.Connection
) -> None:
    before = dump(database_url)
    assert "ENABLE ALWAYS TRIGGER provenance_append_only" in before
    downgrade(database_url, "base")
    tables = await owner.fetchval(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' "
        "AND table_name <> 'alembic_version'"
    )
    assert tables == 0
    migrate(database_url)
    assert dump(database_url) == before


def test_every_cli_command_has_help() -> None:
    from typer.main import get_command

    from lineage.cli import app

    root = get_command(app)
    commands = getattr(root, "commands", {})
    assert {"demo", "serve", "migrate", "walk", "impact", "freshness", "sql", "stop"} <= set(
        commands
    )
    for name, command in commands.items():
        assert command.help, f"lineage {name} has no help text"
        for sub_name, sub in getattr(command, "commands", {}).items():
            assert sub.help, f"lineage {name} {sub_name} has no help text"
    done = subprocess.run(
        ["lineage", "--help"], capture_output=True, text=True, check=True, timeout=60
    )
    assert "demo" in done.stdout


def test_each_checkout_has_its_own_embedded_test_server(tmp_path: Path) -> None:
    from tests.conftest import EMBEDDED_TEST_DIR, embedded_test_dir

    assert embedded_test_dir(tmp_path / "a") != embedded_test_dir(tmp_path / "b")
    assert embedded_test_dir(Path(__file__).parent.parent) == EMBEDDED_TEST_DIR
    assert Path("/tmp/lineage-test-embedded") != EMBEDDED_TEST_DIR


async def test_the_edges_rewritten_with_kinds_match_what_appends_write(
    database_url: str, store: PostgresStore, owner: asyncpg.Connection
) -> None:
    """Migration 0026 writes every edge anew with its child's kind: the rows appends write."""
    await load_incident(store)
    query = (
        "SELECT * FROM provenance_children ORDER BY tenant_id, parent_key, context_uuid, context_id"
    )
    appended = [dict(row) for row in await owner.fetch(query)]
    assert {row["kind"] for row in appended} >= {"chunk", "answer"}
    downgrade(database_url, "0025")
    assert "kind" not in dict((await owner.fetch("SELECT * FROM provenance_children"))[0])
    migrate(database_url)
    assert [dict(row) for row in await owner.fetch(query)] == appended


# A document whose id is a UUID, and chunk ids of each form: text, a UUID as uuid prints it, and
# a UUID in capitals (kept as text: it would not print back as it came).
UUID_DOCUMENT = NewContext(
    context_id="3f2504e0-4f89-11d3-9a0c-0305e82c3301", kind="document",
    source_uri="s3://m.md", content_hash="sha256:" + "0" * 64,
)  # fmt: skip
MIXED_CHUNK_IDS = [
    "c1",
    "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
    "6BA7B811-9DAD-11D1-80B4-00C04FD430C8",
]


async def test_the_edges_keyed_by_0050_match_what_appends_write(
    database_url: str, store: PostgresStore, owner: asyncpg.Connection
) -> None:
    """Migration 0050 keys each edge by md5 of its parent and keeps a child that is a UUID as
    uuid: the rows appends write; its downgrade writes every edge as text again."""
    doc, chunk_ids = UUID_DOCUMENT, MIXED_CHUNK_IDS
    chunks = [
        NewContext(
            context_id=c, parent_ids=[doc.context_id], kind="chunk",
            content_hash=f"sha256:{n:064x}",
        )
        for n, c in enumerate(chunk_ids)
    ]  # fmt: skip
    answer = NewContext(
        context_id="a1", parent_ids=chunk_ids, kind="answer", content_hash="sha256:" + "1" * 64
    )
    await store.append([doc, *chunks, answer])
    query = (
        "SELECT parent_key, context_uuid, context_id, kind FROM provenance_children "
        "ORDER BY parent_key, context_uuid, context_id"
    )
    appended = [dict(row) for row in await owner.fetch(query)]
    by_child = {str(r["context_uuid"] or r["context_id"]): r for r in appended}
    assert by_child["6ba7b810-9dad-11d1-80b4-00c04fd430c8"]["context_id"] is None
    assert by_child["6BA7B811-9DAD-11D1-80B4-00C04FD430C8"]["context_uuid"] is None
    assert {str(r["parent_key"]) for r in appended if r["kind"] == "chunk"} == {
        str(uuid.UUID(hashlib.md5(doc.context_id.encode()).hexdigest()))
    }
    downgrade(database_url, "0049")
    texts = await owner.fetch("SELECT parent_id, context_id FROM provenance_children")
    assert sorted((r["parent_id"], r["context_id"]) for r in texts) == sorted(
        [(doc.context_id, c) for c in chunk_ids] + [(c, "a1") for c in chunk_ids]
    )
    migrate(database_url)
    assert [dict(row) for row in await owner.fetch(query)] == appended


async def test_the_postings_split_by_0048_match_what_appends_write(
    database_url: str, store: PostgresStore, owner: asyncpg.Connection
) -> None:
    """Migration 0048 moves each postings id that is a UUID to context_uuids: the rows appends
    write; and its downgrade lists every id as text again."""
    doc, chunk_ids = UUID_DOCUMENT, MIXED_CHUNK_IDS
    await store.append(
        [doc]
        + [
            NewContext(
                context_id=c,
                parent_ids=[doc.context_id],
                kind="chunk",
                transform="chunker",
                transform_version="chunker@1",
                content_hash=f"sha256:{n:064x}",
            )
            for n, c in enumerate(chunk_ids)
        ]
    )
    query = (
        "SELECT key_no, kind, depth, context_uuids::text[] AS uuids, context_ids "
        "FROM invalidation_postings ORDER BY key_no, kind, depth"
    )
    appended = [dict(row) for row in await owner.fetch(query)]
    assert {"3f2504e0-4f89-11d3-9a0c-0305e82c3301"} in [set(r["uuids"] or []) for r in appended]
    downgrade(database_url, "0047")
    texts = await owner.fetch("SELECT context_ids FROM invalidation_postings")
    assert sorted(i for row in texts for i in row["context_ids"]) == sorted(
        i for row in appended for i in (row["uuids"] or []) + (row["context_ids"] or [])
    )
    migrate(database_url)
    assert [dict(row) for row in await owner.fetch(query)] == appended
