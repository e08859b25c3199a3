"""The verifiable log on a real PostgreSQL: sequencing (also under concurrency), proofs the
service produces, signed checkpoints, and tampering found against an earlier checkpoint."""

import asyncio
import json
import uuid
from pathlib import Path

import asyncpg
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from lineage import db, derive
from lineage.core.errors import LogIntegrityError, NotConsistent, ProofError
from lineage.core.hashing import content_hash
from lineage.core.record import NewContext
from lineage.db import keyring
from lineage.db.database import Database
from lineage.db.migrate import downgrade, migrate
from lineage.db.named_sql import QUERIES
from lineage.services.demo import ANSWER_ID, load_incident
from lineage.services.records import get_records
from lineage.settings import Settings
from lineage.store import PostgresStore
from lineage.verifiable_log import merkle, storage
from lineage.verifiable_log.audit import DatabaseSource, monitor, verify_walk
from lineage.verifiable_log.checkpoint import Checkpoint
from tests.conftest import database_at
from tests.test_merkle import _consistency_shape, _inclusion_shape
from tests.walks_helpers import plan_nodes


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The signing key in the test's own folder; no background rounds unless a test asks."""
    return Settings(
        statement_timeout_ms=5000,
        data_dir=tmp_path,
        log_interval_s=0,
        signing_keys_file=keyring.keyring_path(Settings()),  # the records' keyring
    )


def documents(count: int, tag: str = "") -> list[NewContext]:
    return [
        NewContext(
            context_id=f"doc{tag}_{i}",
            kind="document",
            source_uri=f"s3://docs/{tag}{i}.md",
            content_hash=content_hash(f"{tag} {i}"),
            attributes={"n": i, "score": i / 7},
        )
        for i in range(count)
    ]


async def queued(owner: asyncpg.Connection, tenant_id: str = "default") -> int:
    """How many of the tenant's records wait for their leaves."""
    [row] = await db.fetch(owner, "log_queued_count", tenant_id=tenant_id)
    return int(row["queued"])


async def logged_leaves(database: Database, tenant_id: str = "default") -> list[bytes]:
    """Leaf hashes of the tenant's log in index order, recomputed from the stored records."""
    async with database.tenant(tenant_id) as tx:
        ids = [
            row["context_id"]
            for row in await tx.connection.fetch(
                "SELECT context_id FROM log_leaves WHERE tenant_id = $1 ORDER BY leaf_index",
                tenant_id,
            )
        ]
        records = await get_records(tx, ids)
    return [merkle.leaf_hash(records[i].canonical_bytes()) for i in ids]


async def add_tenant(owner: asyncpg.Connection, tenant_id: str) -> None:
    await owner.execute("INSERT INTO tenants (tenant_id) VALUES ($1)", tenant_id)


async def test_appended_records_join_the_log_and_a_checkpoint_covers_them(
    store: PostgresStore,
    database: Database,
    settings: Settings,
    owner: asyncpg.Connection,
) -> None:
    await store.append(documents(5))
    assert await queued(owner) == 5
    signed = await storage.checkpoint(database, settings, "default")
    assert signed.checkpoint.tree_size == 5
    assert signed.checkpoint.origin == "lineage/default"
    assert storage.signing_key(settings).verifier.open(signed.note) == signed.checkpoint
    leaves = await logged_leaves(database)
    assert signed.checkpoint.root_hash == merkle.root_hash(leaves)
    order = await owner.fetch("SELECT context_id FROM log_leaves ORDER BY leaf_index")
    assert [row["context_id"] for row in order] == [f"doc_{i}" for i in range(5)]
    assert await queued(owner) == 0

    again = await storage.checkpoint(database, settings, "default")
    assert again == signed  # nothing new: the same checkpoint, not a second signature
    await store.append(documents(5))  # replays add nothing
    await store.append(documents(2, tag="b"))
    grown = await storage.checkpoint(database, settings, "default")
    assert grown.checkpoint.tree_size == 7
    assert await owner.fetchval("SELECT count(*) FROM log_checkpoints") == 2
    proof = await storage.consistency(database, "default", 5, 7)
    merkle.verify_consistency(5, 7, signed.checkpoint.root_hash, grown.checkpoint.root_hash, proof)


async def test_the_empty_log_has_a_checkpoint(database: Database, settings: Settings) -> None:
    signed = await storage.checkpoint(database, settings, "default")
    assert (signed.checkpoint.tree_size, signed.checkpoint.root_hash) == (0, merkle.EMPTY_ROOT)


async def test_records_from_before_the_log_join_it(
    database_url: str,
    pool: asyncpg.Pool,
    database: Database,
    settings: Settings,
    owner: asyncpg.Connection,
) -> None:
    downgrade(database_url, "0002")
    for i in range(3):  # as the schema then was: today's append path writes later tables too
        await owner.execute(
            "INSERT INTO provenance (tenant_id, context_id, kind, source_uri, content_hash, "
            "created_at) VALUES ('default', $1, 'document', 's3://old.md', $2, now())",
            f"old_{i}",
            content_hash(f"old {i}"),
        )
    migrate(database_url)
    # Migrating again made a new tenant vouching key: a pool made before holds the old one.
    async with database_at(database_url, settings) as migrated:
        signed = await storage.checkpoint(migrated, settings, "default")
        assert signed.checkpoint.tree_size == 3
        assert signed.checkpoint.root_hash == merkle.root_hash(await logged_leaves(migrated))


async def test_the_log_is_per_tenant(
    pool: asyncpg.Pool, database: Database, settings: Settings, owner: asyncpg.Connection
) -> None:
    await add_tenant(owner, "acme")
    await PostgresStore(database, "acme").append(documents(3))
    await PostgresStore(database).append(documents(2))
    async with pool.acquire() as connection:  # the application role, no tenant set
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="tenant_id is not set"):
            await connection.fetchval("SELECT count(*) FROM events")
    await storage.run_once(database, settings)  # finds both tenants' queues all the same
    sizes = dict(await owner.fetch("SELECT tenant_id, tree_size FROM log_heads"))
    assert sizes == {"acme": 3, "default": 2}
    acme = await storage.checkpoint(database, settings, "acme")
    assert acme.checkpoint.origin == "lineage/acme"
    assert acme.checkpoint.root_hash == merkle.root_hash(await logged_leaves(database, "acme"))


async def test_concurrent_writers_and_sequencers_leave_no_gaps_or_duplicates(
    database_url: str, settings: Settings, owner: asyncpg.Connection
) -> None:
    async with database_at(database_url, max_size=10) as database:
        store = PostgresStore(database)
        writing = True

        async def writer(name: str) -> None:
            for batch in range(6):
                await store.append(documents(4, tag=f"{name}_{batch}"))

        async def sequencer() -> int:
            rounds = 0
            while writing:
                await storage.sequence(database, "default")
                rounds += 1
            return rounds

        sequencers = [asyncio.create_task(sequencer()) for _ in range(3)]
        await asyncio.gather(*(writer(f"w{n}") for n in range(5)))
        writing = False
        assert all(rounds > 0 for rounds in await asyncio.gather(*sequencers))
        head = await storage.sequence(database, "default")
    leaves = await owner.fetch("SELECT leaf_index, context_id FROM log_leaves")
    assert sorted(row["leaf_index"] for row in leaves) == list(range(5 * 6 * 4))
    appended = {row["context_id"] for row in await owner.fetch("SELECT context_id FROM provenance")}
    assert sorted(row["context_id"] for row in leaves) == sorted(appended)
    assert head.tree_size == 120
    assert await queued(owner) == 0
    assert await owner.fetchval("SELECT root_hash FROM log_heads") == head.root_hash


@hypothesis_settings(
    max_examples=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(chunks=st.lists(st.integers(1, 40), min_size=1, max_size=4), data=st.data())
async def test_every_proof_the_service_produces_verifies_and_any_bit_flip_fails(
    database: Database,
    owner: asyncpg.Connection,
    chunks: list[int],
    data: st.DataObject,
) -> None:
    """A fresh tenant per example, its log grown in random batches, so stored subtrees come
    from several sequencing rounds; proofs come from the service, roots from the records."""
    tenant_id = f"t_{uuid.uuid4().hex[:12]}"
    await add_tenant(owner, tenant_id)
    store = PostgresStore(database, tenant_id)
    for number, size in enumerate(chunks):
        await store.append(documents(size, tag=str(number)))
        await storage.sequence(database, tenant_id)
    leaves = await logged_leaves(database, tenant_id)
    assert len(leaves) == sum(chunks)
    bits = st.integers(0, merkle.HASH_SIZE * 8 - 1)

    size = data.draw(st.integers(1, len(leaves)), label="tree_size")
    root = merkle.root_hash(leaves[:size])
    index = data.draw(st.integers(0, size - 1), label="index")
    context_id = f"doc{_tag_of(index, chunks)}"
    found = await storage.inclusion(database, tenant_id, context_id, size)
    assert found.leaf_index == index and found.leaf_hash == leaves[index]
    merkle.verify_inclusion(leaves[index], index, size, found.proof, root)
    if found.proof:
        position = data.draw(st.integers(0, len(found.proof) - 1))
        flipped = list(found.proof)
        flipped[position] = _flip(flipped[position], data.draw(bits))
        assert not _inclusion_verifies(leaves[index], index, size, flipped, root)
    assert not _inclusion_verifies(
        leaves[index], index, size, found.proof, _flip(root, data.draw(bits))
    )
    assert not _inclusion_verifies(
        _flip(leaves[index], data.draw(bits)), index, size, found.proof, root
    )
    other_index = index ^ (1 << data.draw(st.integers(0, 12)))
    assert not _inclusion_verifies(leaves[index], other_index, size, found.proof, root)
    # A bare proof does not pin the size; only a same-shaped size can pass, and the signed
    # checkpoint binds the real size to the root (test_log_checkpoint flips its bits).
    other_size = size ^ (1 << data.draw(st.integers(0, 12)))
    same_shape = _inclusion_shape(index, other_size) == _inclusion_shape(index, size)
    assert _inclusion_verifies(leaves[index], index, other_size, found.proof, root) == same_shape

    second = data.draw(st.integers(1, len(leaves)), label="second")
    first = data.draw(st.integers(1, second), label="first")
    root1, root2 = merkle.root_hash(leaves[:first]), merkle.root_hash(leaves[:second])
    proof = await storage.consistency(database, tenant_id, first, second)
    merkle.verify_consistency(first, second, root1, root2, proof)
    assert not _consistency_verifies(first, second, _flip(root1, data.draw(bits)), root2, proof)
    assert not _consistency_verifies(first, second, root1, _flip(root2, data.draw(bits)), proof)
    if proof:
        position = data.draw(st.integers(0, len(proof) - 1))
        flipped = list(proof)
        flipped[position] = _flip(flipped[position], data.draw(bits))
        assert not _consistency_verifies(first, second, root1, root2, flipped)
    other_first = first ^ (1 << data.draw(st.integers(0, 12)))
    same_shape = _consistency_shape(other_first, second) == _consistency_shape(first, second)
    assert _consistency_verifies(other_first, second, root1, root2, proof) == same_shape
    other_second = second ^ (1 << data.draw(st.integers(0, 12)))
    same_shape = _consistency_shape(first, other_second) == _consistency_shape(first, second)
    assert _consistency_verifies(first, other_second, root1, root2, proof) == same_shape


def _tag_of(index: int, chunks: list[int]) -> str:
    """The id suffix `documents` gave the record at this leaf (batches are logged in order)."""
    for number, size in enumerate(chunks):
        if index < size:
            return f"{number}_{index}"
        index -= size
    raise AssertionError("index beyond the log")


def _flip(value: bytes, bit: int) -> bytes:
    out = bytearray(value)
    out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out)


def _inclusion_verifies(
    leaf: bytes, index: int, size: int, proof: list[bytes], root: bytes
) -> bool:
    try:
        merkle.verify_inclusion(leaf, index, size, proof, root)
    except ProofError:
        return False
    return True


def _consistency_verifies(
    first: int, second: int, root1: bytes, root2: bytes, proof: list[bytes]
) -> bool:
    try:
        merkle.verify_consistency(first, second, root1, root2, proof)
    except ProofError:
        return False
    return True


async def test_proofs_read_only_a_logarithmic_number_of_stored_subtrees(
    store: PostgresStore, database: Database, owner: asyncpg.Connection
) -> None:
    await store.append(documents(300))
    await storage.sequence(database, "default")
    # Each leaf's hash on its row; of the 300 + 150 + 75 + 37 + 18 + 9 + 4 + 2 + 1 complete
    # subtrees, those of every fourth level above the leaves (18 at level 4, 1 at level 8).
    assert await owner.fetchval("SELECT count(hash) FROM log_leaves") == 300
    kept = await owner.fetch("SELECT level, count(*) FROM log_nodes GROUP BY 1 ORDER BY 1")
    assert [tuple(row) for row in kept] == [(4, 18), (8, 1)]
    found = await storage.inclusion(database, "default", "doc_137", 300)
    assert len(found.proof) == len(merkle.inclusion_proof_nodes(137, 300))
    nodes = [
        merkle.subtree_node(*piece)
        for node_range in merkle.inclusion_proof_nodes(137, 300)
        for piece in merkle.subtree_ranges(*node_range)
    ]
    assert len(nodes) <= 2 * (300 - 1).bit_length()
    read = list(dict.fromkeys(piece for node in nodes for piece in storage.kept_under(node)))
    assert len(read) <= 8 * len(nodes)
    await owner.execute("ANALYZE log_leaves, log_nodes")
    # 19 subtree rows fit a page, which the planner rightly reads whole; a log of any size is
    # read a probe per node, as without that choice here.
    async with owner.transaction():
        await owner.execute("SET LOCAL enable_seqscan = off")
        plan = await owner.fetchval(
            "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + QUERIES["log_nodes"].sql,
            *QUERIES["log_nodes"].arguments(
                {
                    "tenant_id": "default",
                    "levels": [level for level, _ in read],
                    "node_indexes": [index for _, index in read],
                }
            ),
        )
    probes = {
        node["Relation Name"]: node
        for node in plan_nodes(json.loads(plan)[0]["Plan"])
        if node.get("Relation Name") in {"log_leaves", "log_nodes"}
    }
    assert {name: probe["Index Name"] for name, probe in probes.items()} == {
        "log_leaves": "log_leaves_pkey",
        "log_nodes": "log_nodes_pkey",
    }
    leaves = sum(1 for level, _ in read if level == 0)
    assert probes["log_leaves"]["Actual Loops"] == leaves
    assert probes["log_nodes"]["Actual Loops"] == len(read) - leaves
    assert all(probe["Actual Rows"] == 1 for probe in probes.values())  # per loop


# --- tampering ----------------------------------------------------------------------------------


async def tamper_with_record(owner: asyncpg.Connection, context_id: str) -> None:
    """What the database alone cannot stop: the superuser lifts the append-only trigger."""
    await owner.execute("ALTER TABLE provenance DISABLE TRIGGER provenance_append_only")
    await owner.execute(
        "UPDATE provenance SET source_uri = 's3://policies/rewritten.md' WHERE context_id = $1",
        context_id,
    )
    await owner.execute("ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_append_only")


async def test_a_changed_record_fails_against_an_earlier_checkpoint(
    store: PostgresStore,
    database: Database,
    settings: Settings,
    owner: asyncpg.Connection,
) -> None:
    await load_incident(store)
    key = storage.signing_key(settings).verifier
    signed = await storage.checkpoint(database, settings, "default")
    source = DatabaseSource(database, settings, "default")
    before = await verify_walk(source, key, signed.note, ANSWER_ID)
    assert before.ok, before.lines()
    assert {cid for cid, _, _ in before.included} >= {ANSWER_ID, "chunk_42", "doc_contractors_v1"}

    await tamper_with_record(owner, "doc_contractors_v1")
    after = await verify_walk(source, key, signed.note, ANSWER_ID)
    assert not after.ok
    assert [cid for cid, _ in after.problems] == ["doc_contractors_v1"]
    assert "changed after it was logged" in after.problems[0][1]
    assert len(after.included) == len(before.included) - 1

    # Rewriting the stored leaf hash to match does not help: the path no longer meets the root.
    async with database.tenant("default") as tx:
        [row] = await tx.connection.fetch(
            "SELECT leaf_index FROM log_leaves WHERE context_id = 'doc_contractors_v1'"
        )
        records = await get_records(tx, ["doc_contractors_v1"])
    forged = merkle.leaf_hash(records["doc_contractors_v1"].canonical_bytes())
    await owner.execute(
        "UPDATE log_leaves SET hash = $1 WHERE leaf_index = $2", forged, row["leaf_index"]
    )
    rewritten = dict((await verify_walk(source, key, signed.note, ANSWER_ID)).problems)
    assert "does not match the root" in rewritten["doc_contractors_v1"]
    # Every proof through a subtree folded from the rewritten hash fails alike: its sibling's
    # among them.
    assert "doc_employee_leave_v1" in rewritten
    assert all("does not match the root" in problem for problem in rewritten.values())


async def test_a_record_removed_where_nothing_expires_fails_as_missing(
    store: PostgresStore,
    database: Database,
    settings: Settings,
    owner: asyncpg.Connection,
) -> None:
    """Without an expiry horizon a record gone from the store cannot have expired."""
    await load_incident(store)
    key = storage.signing_key(settings).verifier
    signed = await storage.checkpoint(database, settings, "default")
    await owner.execute("ALTER TABLE provenance DISABLE TRIGGER provenance_append_only")
    await owner.execute("DELETE FROM provenance WHERE context_id = 'doc_contractors_v1'")
    await owner.execute("ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_append_only")
    verified = await verify_walk(
        DatabaseSource(database, settings, "default"), key, signed.note, ANSWER_ID
    )
    assert not verified.ok and verified.expired == []
    assert [cid for cid, _ in verified.problems] == ["doc_contractors_v1"]
    assert verified.problems[0][1].startswith("missing: leaf ")
    assert "retention never expired any of this tenant's records" in verified.problems[0][1]


async def test_a_record_appended_after_the_checkpoint_is_not_covered_by_it(
    store: PostgresStore, database: Database, settings: Settings
) -> None:
    [doc] = [a.record for a in await store.append(documents(1))]
    signed = await storage.checkpoint(database, settings, "default")
    late = await derive(store, [doc.context_id], "late chunk", "chunk", "chunker", "1.0")
    key = storage.signing_key(settings).verifier
    source = DatabaseSource(database, settings, "default")
    result = await verify_walk(source, key, signed.note, late.context_id)
    assert [cid for cid, _ in result.problems] == [late.context_id]
    assert "not in the log yet" in result.problems[0][1]
    assert result.included == []  # an unlogged record's parent ids cannot be trusted
    newer = await storage.checkpoint(database, settings, "default")
    assert (await verify_walk(source, key, newer.note, late.context_id)).ok
    outside = await verify_walk(source, key, signed.note, late.context_id)
    assert "outside a tree of size 1" in outside.problems[0][1]


async def test_the_service_refuses_to_sign_a_tree_that_does_not_extend_its_last_checkpoint(
    store: PostgresStore, database: Database, settings: Settings, owner: asyncpg.Connection
) -> None:
    await store.append(documents(5))
    signed = await storage.checkpoint(database, settings, "default")
    # Rewrite leaf 0's hash, which every later root is built on.
    await owner.execute("UPDATE log_leaves SET hash = $1 WHERE leaf_index = 0", bytes(32))
    await store.append(documents(2, tag="b"))
    with pytest.raises(LogIntegrityError, match="does not extend the checkpoint of size 5"):
        await storage.checkpoint(database, settings, "default")
    assert await owner.fetchval("SELECT count(*) FROM log_checkpoints") == 1

    await owner.execute("UPDATE log_heads SET root_hash = $1", bytes(32))
    with pytest.raises(LogIntegrityError, match="does not hash to its head's root"):
        await storage.checkpoint(database, settings, "default")
    assert await owner.fetchval("SELECT note FROM log_checkpoints") == signed.note


async def test_monitor_accepts_growth_and_rejects_a_fork(
    store: PostgresStore, database: Database, settings: Settings
) -> None:
    await store.append(documents(3))
    key = storage.signing_key(settings)
    old = await storage.checkpoint(database, settings, "default")
    await store.append(documents(4, tag="b"))
    source = DatabaseSource(database, settings, "default")
    assert (await monitor(source, key.verifier, old.note)).new.tree_size == 3  # not signed yet
    await storage.checkpoint(database, settings, "default")
    checked = await monitor(source, key.verifier, old.note)
    assert (checked.old.tree_size, checked.new.tree_size) == (3, 7)
    same = await monitor(source, key.verifier, checked.new_note)
    assert same.new.tree_size == 7

    # A checkpoint shown to someone else, of another history the same size as the old one.
    fork = Checkpoint(old.checkpoint.origin, 3, merkle.leaf_hash(b"fork"), old.checkpoint.time)
    with pytest.raises(NotConsistent, match="rewritten"):
        await monitor(source, key.verifier, key.sign(fork))
    bigger = Checkpoint(old.checkpoint.origin, 9, merkle.leaf_hash(b"fork"), old.checkpoint.time)
    with pytest.raises(NotConsistent, match="shrank"):
        await monitor(source, key.verifier, key.sign(bigger))


async def test_the_background_task_sequences_and_signs(
    store: PostgresStore, database: Database, settings: Settings, owner: asyncpg.Connection
) -> None:
    await store.append(documents(3))
    quick = settings.model_copy(update={"log_interval_s": 0.01})
    async with storage.background(database, quick):
        for _ in range(500):
            if await owner.fetchval("SELECT count(*) FROM log_checkpoints"):
                break
            await asyncio.sleep(0.01)
    assert await owner.fetchval("SELECT max(tree_size) FROM log_checkpoints") == 3
