"""Migration 0042: the log keeps each leaf's hash on its row and the subtrees of every fourth
level above; down to 0041 every complete subtree is a row again, hashed anew from the kept ones,
and up again the proofs and checkpoints are the same bytes."""

from pathlib import Path

import asyncpg
import pytest

from lineage.db.migrate import downgrade, migrate
from lineage.settings import Settings
from lineage.store import PostgresStore
from lineage.verifiable_log import merkle, storage
from tests.conftest import database_at
from tests.test_log import documents, logged_leaves

RECORDS = 40  # subtrees at levels 0-5: two of them kept above the leaves (4, 0) and (4, 1)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(statement_timeout_ms=5000, data_dir=tmp_path)


async def nodes(owner: asyncpg.Connection) -> dict[tuple[int, int], bytes]:
    rows = await owner.fetch("SELECT level, node_index, hash FROM log_nodes")
    return {(row["level"], row["node_index"]): bytes(row["hash"]) for row in rows}


async def test_every_subtree_comes_back_down_and_goes_again_up(
    database_url: str, settings: Settings, owner: asyncpg.Connection
) -> None:
    async with database_at(database_url, settings) as database:
        await PostgresStore(database).append(documents(RECORDS))
        signed = await storage.checkpoint(database, settings, "default")
        proof = await storage.inclusion(database, "default", "doc_17", RECORDS)
        leaves = await logged_leaves(database)
    every = merkle.completed_subtrees({}, 0, leaves)
    kept = {(level, index): h for (level, index), h in every.items() if level == 4}
    assert await nodes(owner) == kept
    stored_leaves = await owner.fetch("SELECT hash FROM log_leaves ORDER BY leaf_index")
    assert [bytes(row["hash"]) for row in stored_leaves] == leaves

    downgrade(database_url, "0041")
    assert await nodes(owner) == every  # levels 1-3 and 5 hashed anew, the leaves as nodes

    migrate(database_url)
    assert await nodes(owner) == kept
    async with database_at(database_url, settings) as database:
        again = await storage.inclusion(database, "default", "doc_17", RECORDS)
        assert (again.leaf_hash, again.proof) == (proof.leaf_hash, proof.proof)
        # The signer's witness holds the checkpoint signed before: the grown tree extends it.
        await PostgresStore(database).append(documents(3, tag="b"))
        grown = await storage.checkpoint(database, settings, "default")
        assert grown.checkpoint.tree_size == RECORDS + 3
        assert grown.checkpoint.root_hash == merkle.root_hash(await logged_leaves(database))
    merkle.verify_inclusion(
        proof.leaf_hash, proof.leaf_index, RECORDS, proof.proof, signed.checkpoint.root_hash
    )


async def test_log_nodes_keep_only_every_fourth_level(
    database_url: str, settings: Settings, owner: asyncpg.Connection
) -> None:
    async with database_at(database_url, settings) as database:
        await PostgresStore(database).append(documents(2))
        await storage.sequence(database, "default")
    for level in (0, 1, 2, 3, 5):
        with pytest.raises(asyncpg.CheckViolationError, match="log_nodes_kept_levels"):
            await owner.execute(
                "INSERT INTO log_nodes (tenant_id, level, node_index, hash) "
                "VALUES ('default', $1, 9, $2)",
                level,
                bytes(32),
            )
