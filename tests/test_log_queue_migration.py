"""Migration 0039: the log's queue moves from log_queue into the event stream (the events past
log_heads.events_logged) and back, in queue order, and the log goes on from where it stood."""

from pathlib import Path

import asyncpg
import pytest

from lineage.db.migrate import downgrade, migrate
from lineage.settings import Settings
from lineage.store import PostgresStore
from lineage.verifiable_log import merkle, storage
from tests.conftest import database_at
from tests.test_log import documents, logged_leaves


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(statement_timeout_ms=5000, data_dir=tmp_path, log_step_leaves=2)


async def appended_and_half_logged(database_url: str, settings: Settings) -> list[str]:
    """Five records appended at the newest revision, the first two logged; their ids in order."""
    async with database_at(database_url, settings) as database:
        await PostgresStore(database).append(documents(5))
        head = await storage.sequence(database, "default", max_steps=1)
    assert head.tree_size == 2
    return [f"doc_{i}" for i in range(5)]


async def queue_rows(owner: asyncpg.Connection) -> list[str]:
    rows = await owner.fetch("SELECT context_id FROM log_queue ORDER BY queued_id")
    return [row["context_id"] for row in rows]


async def queued_next(database_url: str, settings: Settings) -> list[str]:
    async with database_at(database_url, settings) as database, database.tenant("default") as tx:
        rows = await tx.fetch("log_queued_records", batch_size=100)
    return [row["context_id"] for row in rows]


async def test_the_queue_goes_into_the_stream_and_back_in_order(
    database_url: str, settings: Settings, owner: asyncpg.Connection
) -> None:
    ids = await appended_and_half_logged(database_url, settings)
    downgrade(database_url, "0038")
    assert await queue_rows(owner) == ids[2:]
    migrate(database_url)
    assert await owner.fetchval("SELECT events_logged FROM log_heads") == 2
    assert await queued_next(database_url, settings) == ids[2:]
    async with database_at(database_url, settings) as database:
        head = await storage.sequence(database, "default")
        assert head.tree_size == 5
        assert head.root_hash == merkle.root_hash(await logged_leaves(database))
    leaves = await owner.fetch("SELECT context_id FROM log_leaves ORDER BY leaf_index")
    assert [row["context_id"] for row in leaves] == ids


async def test_a_queue_out_of_stream_order_is_given_new_events_in_its_order(
    database_url: str, settings: Settings, owner: asyncpg.Connection
) -> None:
    ids = await appended_and_half_logged(database_url, settings)
    downgrade(database_url, "0038")
    await owner.execute("DELETE FROM log_queue")
    await owner.execute(
        "INSERT INTO log_queue (tenant_id, context_id) "
        "VALUES ('default', 'doc_4'), ('default', 'doc_2'), ('default', 'doc_3')"
    )
    migrate(database_url)
    # Past the five positions the stream had: the queue, in its own order.
    events = await owner.fetch("SELECT position, context_id FROM events WHERE position > 5")
    assert sorted((row["position"], row["context_id"]) for row in events) == [
        (6, "doc_4"),
        (7, "doc_2"),
        (8, "doc_3"),
    ]
    assert await owner.fetchval("SELECT events_logged FROM log_heads") == 5
    assert await queued_next(database_url, settings) == ["doc_4", "doc_2", "doc_3"]
    async with database_at(database_url, settings) as database:
        # The counter follows: the next append takes the position after them.
        await PostgresStore(database).append(documents(1, tag="after"))
        position = await owner.fetchval(
            "SELECT position FROM events WHERE context_id = 'docafter_0'"
        )
        assert position == 9
        await storage.sequence(database, "default")
    leaves = await owner.fetch("SELECT context_id FROM log_leaves ORDER BY leaf_index")
    assert [row["context_id"] for row in leaves] == [
        *ids[:2],
        "doc_4",
        "doc_2",
        "doc_3",
        "docafter_0",
    ]


async def test_the_downgrade_queues_what_the_log_has_not_taken(
    database_url: str, settings: Settings, owner: asyncpg.Connection
) -> None:
    ids = await appended_and_half_logged(database_url, settings)
    async with database_at(database_url, settings) as database, database.tenant("default") as tx:
        [row] = await tx.fetch("log_queued_count")
    assert row["queued"] == 3
    downgrade(database_url, "0038")
    assert await queue_rows(owner) == ids[2:]
    columns = await owner.fetch(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'log_heads'"
    )
    assert "events_logged" not in {column["column_name"] for column in columns}
    assert await owner.fetchval("SELECT has_table_privilege('lineage_app', 'log_queue', 'SELECT')")
    migrate(database_url)
    async with database_at(database_url, settings) as database:
        head = await storage.sequence(database, "default")
    assert head.tree_size == 5
