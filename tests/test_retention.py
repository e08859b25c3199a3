"""Retention by time: a month past the period goes whole (its partitions dropped, no DELETE of
a record), audited; walks that reach into it say so; forget tombstones and the verifiable log
outlive it; the period is the owner's alone."""

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from lineage.core.errors import Forbidden
from lineage.core.hashing import content_hash
from lineage.core.record import ContextRecord, NewContext
from lineage.db.database import Database
from lineage.services import retention, walks
from lineage.settings import Settings
from lineage.store.postgres import get_records, insert_records
from lineage.verifiable_log import merkle, storage
from lineage.verifiable_log.audit import DatabaseSource, verify_walk
from lineage.verifiable_log.checkpoint import Checkpoint

PARTITIONED = ("provenance", "record_signatures", "provenance_children", "root_sources")
NOW = datetime.now(UTC)
# Two years back: past a 12-month period whatever the day.
OLD = (NOW.replace(day=10, hour=12) - timedelta(days=730)).replace(day=10)
OLD_MONTH = OLD.strftime("%Y_%m")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(statement_timeout_ms=5000, data_dir=tmp_path, log_interval_s=0)


@pytest.fixture
async def owner_database(database_url: str, settings: Settings) -> AsyncIterator[Database]:
    created = await Database.connect(settings, database_url, max_size=2, as_owner=True)
    yield created
    await created.close()


def record(context_id: str, kind: str, created_at: datetime, **fields: object) -> ContextRecord:
    proposal = NewContext(
        context_id=context_id, kind=kind, content_hash=content_hash(context_id), **fields
    )
    return proposal.stamped("default", created_at)


OLD_RECORDS = [
    record("doc_old", "document", OLD, source_uri="s3://old.md"),
    record("chunk_old", "chunk", OLD, parent_ids=["doc_old"], transform="chunker@1"),
    record(
        "tomb_old", "tombstone", OLD, parent_ids=["chunk_old"], transform="forget@1",
        attributes={"source_uri_hash": "hmacsha256:00"},
    ),
]  # fmt: skip
NEW_RECORDS = [
    record("answer_new", "answer", NOW, parent_ids=["chunk_old"], produced_by="agent/answer@v1"),
    record("doc_new", "document", NOW, source_uri="s3://new.md"),
]


async def append(database: Database, records: list[ContextRecord]) -> None:
    """Through the append path, signed with the database's keyring."""
    async with database.tenant("default") as tx:
        await insert_records(tx, records)


async def partitions_of(owner: asyncpg.Connection, month: str) -> list[str]:
    names = [f"{table}_p{month}" for table in PARTITIONED]
    return [name for name in names if await owner.fetchval("SELECT to_regclass($1)", name)]


async def test_an_expired_month_goes_whole_and_what_outlives_it_stays(
    database: Database,
    owner_database: Database,
    owner: asyncpg.Connection,
    settings: Settings,
) -> None:
    await append(database, OLD_RECORDS)  # adds the old month's partitions on the way
    await append(database, NEW_RECORDS)
    await owner.execute(
        "SELECT set_config('lineage.tenant_id', 'default', false);"
        "INSERT INTO context_text (tenant_id, context_id, text) "
        "VALUES ('default', 'chunk_old', 'x')"
    )
    before = await storage.checkpoint(database, settings, "default")
    leaf_of_chunk = merkle.leaf_hash(OLD_RECORDS[1].canonical_bytes())
    assert await partitions_of(owner, OLD_MONTH) == [f"{t}_p{OLD_MONTH}" for t in PARTITIONED]

    assert await retention.set_policy(owner_database, 12) == 12
    receipt = await retention.apply(database)  # the service's schedule runs it as lineage_app

    assert OLD.strftime("%Y-%m") in [month["month"] for month in receipt["months_dropped"]]
    assert receipt["tombstones_kept"] == 1 and receipt["texts_purged"] == 1
    assert await partitions_of(owner, OLD_MONTH) == []  # dropped, not emptied
    [audited] = await owner.fetch(
        "SELECT detail FROM operator_audit WHERE action = 'retention_apply'"
    )
    assert json.loads(audited["detail"])["months_dropped"] == receipt["months_dropped"]
    async with database.tenant("default") as tx:
        kept = await get_records(tx, ["doc_old", "chunk_old", "answer_new"])
        tombstone = await tx.connection.fetchrow(
            "SELECT * FROM forget_tombstones WHERE context_id = 'tomb_old'"
        )
        texts = await tx.connection.fetchval("SELECT count(*) FROM context_text")
    assert set(kept) == {"answer_new"}
    assert tombstone is not None and tombstone["signature"] is not None
    assert tombstone["parent_ids"] == ["chunk_old"]
    assert texts == 0

    # The walk up stops where retention cut it, and says so.
    walked = await walks.walk_back(database, settings, "default", "answer_new", None)
    assert [node["context_id"] for node in walked.nodes] == ["answer_new"]
    assert walked.truncated and walked.truncated_reason == "retention"
    # Down from an expired record: its kept children are still found, flagged.
    down = await walks.run(
        database, settings, "blast_radius",
        tenant_id="default", context_ids=["chunk_old"], kind="all", max_depth=20,
    )  # fmt: skip
    assert [(n["context_id"], n["expired"]) for n in down] == [("answer_new", True)]
    # By source: the kept descendants of an expired document, flagged.
    by_source = await walks.run(
        database, settings, "blast_radius_ids_by_source",
        tenant_id="default", source_uri="s3://old.md", kind="any", max_depth=20,
    )  # fmt: skip
    assert [(n["context_id"], n["expired"]) for n in by_source] == [("answer_new", True)]
    # A walk that reaches nothing expired is complete.
    fresh = await walks.walk_back(database, settings, "default", "doc_new", None)
    assert not fresh.truncated and fresh.truncated_reason is None

    # The log keeps every leaf: the old checkpoint's tree still proves, and a newer one extends
    # it; the expired record's leaf hash is still where it was.
    after = await storage.checkpoint(database, settings, "default")
    assert after.checkpoint.tree_size == before.checkpoint.tree_size
    proof = await storage.inclusion(database, "default", "answer_new", before.checkpoint.tree_size)
    assert proof.record is not None
    merkle.verify_inclusion(
        merkle.leaf_hash(proof.record.canonical_bytes()), proof.leaf_index,
        proof.tree_size, proof.proof, before.checkpoint.root_hash,
    )  # fmt: skip
    await append(database, [record("late", "document", datetime.now(UTC), source_uri="s3://l.md")])
    grown = await storage.checkpoint(database, settings, "default")
    merkle.verify_consistency(
        before.checkpoint.tree_size, grown.checkpoint.tree_size,
        before.checkpoint.root_hash, grown.checkpoint.root_hash,
        await storage.consistency(
            database, "default", before.checkpoint.tree_size, grown.checkpoint.tree_size
        ),
    )  # fmt: skip
    assert isinstance(grown.checkpoint, Checkpoint)
    stored_leaf = await owner.fetchval(
        "SELECT n.hash FROM log_leaves AS l JOIN log_nodes AS n ON n.tenant_id = l.tenant_id "
        "AND n.level = 0 AND n.node_index = l.leaf_index WHERE l.context_id = 'chunk_old'"
    )
    assert stored_leaf == leaf_of_chunk
    # An expired record's proof: its leaf hash at its index, no record.
    gone = await storage.inclusion(database, "default", "chunk_old", before.checkpoint.tree_size)
    assert gone.record is None and gone.leaf_hash == leaf_of_chunk
    merkle.verify_inclusion(
        gone.leaf_hash, gone.leaf_index, gone.tree_size, gone.proof, before.checkpoint.root_hash
    )
    # `lineage log verify answer_new`: the kept record verifies; the expired parent is named.
    verified = await verify_walk(
        DatabaseSource(database, settings, "default"), storage.signing_key(settings).verifier,
        before.note, "answer_new",
    )  # fmt: skip
    assert verified.ok and [cid for cid, _, _ in verified.included] == ["answer_new"]
    assert [cid for cid, _ in verified.expired] == ["chunk_old"]


async def test_no_period_keeps_everything_and_only_the_owner_sets_it(
    database: Database, pool: asyncpg.Pool, owner: asyncpg.Connection
) -> None:
    await append(database, OLD_RECORDS)
    receipt = await retention.apply(database)
    assert receipt["keep_months"] is None and receipt["months_dropped"] == []
    assert len(await partitions_of(owner, OLD_MONTH)) == len(PARTITIONED)
    assert await owner.fetchval("SELECT count(*) FROM operator_audit") == 0
    with pytest.raises(Forbidden):
        await retention.set_policy(database, 1)
    async with pool.acquire() as connection:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await connection.execute("UPDATE retention_policy SET keep_months = 1")


async def test_an_id_stays_unique_across_months(database: Database) -> None:
    """Partitions are unique per month only; the append's check covers the other months."""
    await append(database, OLD_RECORDS[:1])
    again = record("doc_old", "document", NOW, source_uri="s3://old.md")
    async with database.tenant("default") as tx:
        inserted = await insert_records(tx, [again])
        count = await tx.connection.fetchval(
            "SELECT count(*) FROM provenance WHERE context_id = 'doc_old'"
        )
    assert inserted == set() and count == 1
