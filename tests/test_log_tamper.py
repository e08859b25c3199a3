"""Tampering by someone who can rewrite the database (a superuser): the service signs no fork
even when the stored checkpoints are gone too, a monitor sees every published checkpoint, and
a record slipped into the log around the service fails `log verify` for want of a signature."""

from pathlib import Path

import asyncpg
import pytest

from lineage.core.errors import LogIntegrityError, NotConsistent
from lineage.core.hashing import content_hash
from lineage.db import keyring
from lineage.db.database import Database
from lineage.services.demo import ANSWER_ID, load_incident
from lineage.settings import Settings
from lineage.store import PostgresStore
from lineage.verifiable_log import merkle, storage
from lineage.verifiable_log.audit import DatabaseSource, monitor, verify_walk
from lineage.verifiable_log.checkpoint import Checkpoint
from tests.test_log import documents

LOG_TABLES = ("log_checkpoints", "log_nodes", "log_leaves", "log_heads")
# The stream renumbered over the stored records in an order of the caller's: with the log's
# tables emptied, the queue the next log steps take.
REQUEUE = (
    "DELETE FROM events; INSERT INTO events (tenant_id, position, context_id) "
    "SELECT tenant_id, row_number() OVER (ORDER BY context_id {}), context_id "
    "FROM provenance ORDER BY context_id {} {}"
)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        statement_timeout_ms=5000,
        data_dir=tmp_path,
        log_interval_s=0,
        signing_keys_file=keyring.keyring_path(Settings()),  # the records' keyring
    )


async def test_a_rewritten_log_is_not_signed_even_with_its_checkpoints_gone(
    store: PostgresStore, database: Database, settings: Settings, owner: asyncpg.Connection
) -> None:
    await store.append(documents(5))
    signed = await storage.checkpoint(database, settings, "default")
    # Every trace of the log removed, and the same records logged again in another order: a
    # tree of the same size with another root, and no stored checkpoint to compare it with.
    for table in LOG_TABLES:
        await owner.execute(f"DELETE FROM {table}")
    await owner.execute(REQUEUE.format("DESC", "DESC", ""))
    with pytest.raises(LogIntegrityError, match="refusing to sign a fork"):
        await storage.checkpoint(database, settings, "default")
    assert await owner.fetchval("SELECT count(*) FROM log_checkpoints") == 0
    # A shorter log (records dropped) is refused too.
    for table in LOG_TABLES:
        await owner.execute(f"DELETE FROM {table}")
    await owner.execute(REQUEUE.format("", "", "LIMIT 3"))
    with pytest.raises(LogIntegrityError, match="signed a checkpoint of 5"):
        await storage.checkpoint(database, settings, "default")
    assert signed.checkpoint.tree_size == 5


async def test_the_monitor_checks_every_published_checkpoint(
    store: PostgresStore, database: Database, settings: Settings, owner: asyncpg.Connection
) -> None:
    await store.append(documents(3))
    key = storage.signing_key(settings)
    old = await storage.checkpoint(database, settings, "default")
    await store.append(documents(4, tag="b"))
    await storage.checkpoint(database, settings, "default")
    source = DatabaseSource(database, settings, "default")
    assert (await monitor(source, key.verifier, old.note)).checked == 3  # 3, 7 and the newest
    assert [Checkpoint.from_note(n).tree_size for n in await source.history(0)] == [3, 7]
    # A signed checkpoint that extends nothing, published between the two: the newest still
    # extends the saved one, but the fork is seen.
    fork = Checkpoint(old.checkpoint.origin, 5, merkle.leaf_hash(b"fork"), old.checkpoint.time)
    await owner.execute(
        "INSERT INTO log_checkpoints (tenant_id, tree_size, root_hash, signed_at, note) "
        "VALUES ('default', 5, $1, now(), $2)",
        fork.root_hash,
        key.sign(fork),
    )
    with pytest.raises(NotConsistent, match="size 5 does not extend the saved one of size 3"):
        await monitor(source, key.verifier, old.note)


async def test_a_record_logged_around_the_service_fails_log_verify(
    store: PostgresStore, database: Database, settings: Settings, owner: asyncpg.Connection
) -> None:
    await load_incident(store)
    # A superuser writes a record beside the service's and queues it for the log by hand.
    await owner.execute(
        "INSERT INTO provenance (tenant_id, context_id, kind, source_uri, content_hash, "
        "created_at) VALUES ('default', 'planted', 'document', 's3://planted.md', $1, now())",
        content_hash("planted"),
    )
    await owner.execute(
        "INSERT INTO events (tenant_id, position, context_id) "
        "SELECT 'default', max(position) + 1, 'planted' FROM events"
    )
    signed = await storage.checkpoint(database, settings, "default")
    key = storage.signing_key(settings).verifier
    source = DatabaseSource(database, settings, "default")
    planted = await verify_walk(source, key, signed.note, "planted")
    assert not planted.ok
    assert planted.problems == [
        ("planted", "its signature does not verify (unsigned, checked by this machine's record "
         "keyring)")
    ]  # fmt: skip
    assert (await verify_walk(source, key, signed.note, ANSWER_ID)).ok


async def test_log_verify_tells_a_removed_leaf_from_a_queued_record(
    store: PostgresStore, database: Database, settings: Settings, owner: asyncpg.Connection
) -> None:
    await store.append(documents(3))
    signed = await storage.checkpoint(database, settings, "default")
    await store.append(documents(1, tag="late"))  # queued: no checkpoint has taken it in yet
    await owner.execute("DELETE FROM log_leaves WHERE context_id = 'doc_1'")
    key = storage.signing_key(settings).verifier
    source = DatabaseSource(database, settings, "default")
    [(_, removed)] = (await verify_walk(source, key, signed.note, "doc_1")).problems
    assert "it is queued" not in removed, removed
    assert "not queued" in removed and "removed" in removed, removed
    [(_, late)] = (await verify_walk(source, key, signed.note, "doclate_0")).problems
    assert "it is queued" in late, late
