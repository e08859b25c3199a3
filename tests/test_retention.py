"""Retention by time: a month past the period goes whole (its partitions dropped, no DELETE of
a record), audited; walks that reach into it say so; forget tombstones and the verifiable log
outlive it; the period is the owner's alone. Without a period each table has one partition;
what it held when a period was set expires whole once all of it is past the period."""

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from lineage import db
from lineage.core.errors import Conflict, Forbidden, NotFound
from lineage.core.hashing import content_hash
from lineage.core.record import ContextRecord, NewContext
from lineage.db import PARTITIONED
from lineage.db.database import Database
from lineage.db.named_sql import QUERIES
from lineage.services import reads, retention, walks
from lineage.services.appends import insert_records
from lineage.services.records import get_records
from lineage.services.root_sources import stored_parents
from lineage.settings import Settings
from lineage.verifiable_log import merkle, storage
from lineage.verifiable_log.audit import DatabaseSource, verify_walk
from lineage.verifiable_log.checkpoint import Checkpoint

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


# Each partition's replica identity: a unique index ('i'), whole rows ('f'), or the primary key
# ('d' with one); 'n', or 'd' without a key, stops a Citus shard move by logical replication.
REPLICA_IDENTITIES = """
SELECT c.relname, c.relreplident::text AS relreplident,
       EXISTS (SELECT 1 FROM pg_index AS x WHERE x.indrelid = c.oid AND x.indisprimary) AS keyed
FROM pg_inherits AS h JOIN pg_class AS c ON c.oid = h.inhrelid
WHERE h.inhparent = ANY ($1::regclass[])
ORDER BY c.relname
"""


async def test_every_partition_has_a_replica_identity_a_shard_move_can_use(
    database: Database, owner_database: Database, owner: asyncpg.Connection
) -> None:
    """The open partitions, and a month's made by an append under a retention policy."""
    await retention.set_policy(owner_database, 12)
    await append(database, OLD_RECORDS)
    partitions = await owner.fetch(REPLICA_IDENTITIES, list(PARTITIONED))
    assert {row["relname"] for row in partitions} >= set(await partitions_of(owner, OLD_MONTH))
    unusable = [
        row["relname"]
        for row in partitions
        if not (row["relreplident"] in ("i", "f") or (row["relreplident"] == "d" and row["keyed"]))
    ]
    assert unusable == [], [tuple(row) for row in partitions]


async def test_an_expired_month_goes_whole_and_what_outlives_it_stays(
    database: Database,
    owner_database: Database,
    owner: asyncpg.Connection,
    settings: Settings,
) -> None:
    assert await retention.set_policy(owner_database, 12) == 12  # month partitions from now on
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
    down = await reads.run(
        database, settings, "blast_radius",
        tenant_id="default", context_ids=["chunk_old"], kind="all", max_depth=20,
    )  # fmt: skip
    assert [(n["context_id"], n["expired"]) for n in down] == [("answer_new", True)]
    # By source: the kept descendants of an expired document, flagged.
    by_source = await reads.run(
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
    stored_leaf = await owner.fetchval("SELECT hash FROM log_leaves WHERE context_id = 'chunk_old'")
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


async def test_a_record_removed_after_the_expiry_horizon_fails_as_missing(
    database: Database, owner_database: Database, owner: asyncpg.Connection, settings: Settings
) -> None:
    """Retention drops what was created before the horizon; a record gone that was created
    after it (its leaf keeps its created_at) was removed around the service."""
    await retention.set_policy(owner_database, 12)
    await append(database, [*OLD_RECORDS, *NEW_RECORDS])
    signed = await storage.checkpoint(database, settings, "default")
    await retention.apply(database)
    await owner.execute("ALTER TABLE provenance DISABLE TRIGGER provenance_append_only")
    await owner.execute("DELETE FROM provenance WHERE context_id = 'doc_new'")
    await owner.execute("ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_append_only")
    source, key = DatabaseSource(database, settings, "default"), storage.signing_key(settings)
    expired = await verify_walk(source, key.verifier, signed.note, "answer_new")
    removed = await verify_walk(source, key.verifier, signed.note, "doc_new")
    assert expired.ok and [cid for cid, _ in expired.expired] == ["chunk_old"]
    assert not removed.ok and removed.expired == []
    [(context_id, problem)] = removed.problems
    assert context_id == "doc_new"
    assert problem.startswith(f"missing: leaf 4 of the log is this record, created {NOW:%Y-%m-%d}")


async def test_an_expired_month_takes_its_invalidation_postings_with_it(
    database: Database, owner_database: Database, owner: asyncpg.Connection, settings: Settings
) -> None:
    """A month's postings lie in its records' partition (migration 0034): what depends on a
    transform version or a source (0036) lists no record retention dropped."""
    chunked = {"parent_ids": ["doc_old"], "transform": "chunker", "transform_version": "chunker@1"}
    await retention.set_policy(owner_database, 12)
    await append(database, [OLD_RECORDS[0], record("chunk_old", "chunk", OLD, **chunked)])
    await append(database, [record("answer_new", "answer", NOW, parent_ids=["chunk_old"])])
    await owner.execute("SELECT set_config('lineage.tenant_id', 'default', false)")
    listed = (
        "SELECT k.key, ip.kind, ip.depth, ip.context_ids FROM invalidation_postings AS ip "
        "JOIN invalidation_keys AS k ON k.tenant_id = ip.tenant_id AND k.key_no = ip.key_no "
        "ORDER BY ip.depth, k.key"
    )
    old_month = f"invalidation_postings_p{OLD_MONTH}"
    assert await owner.fetchval(f"SELECT count(*) FROM {old_month}") == 3
    assert [tuple(row) for row in await owner.fetch(listed)] == [
        ("source:s3://old.md", "document", 0, ["doc_old"]),
        ("transform_version:chunker@1", "chunk", 0, ["chunk_old"]),
        ("source:s3://old.md", "chunk", 1, ["chunk_old"]),
        ("transform_version:chunker@1", "answer", 1, ["answer_new"]),
        ("source:s3://old.md", "answer", 2, ["answer_new"]),
    ]
    await storage.checkpoint(database, settings, "default")  # retention waits for the log

    await retention.apply(database)

    assert await owner.fetchval("SELECT to_regclass($1)", old_month) is None
    assert [tuple(row) for row in await owner.fetch(listed)] == [
        ("transform_version:chunker@1", "answer", 1, ["answer_new"]),
        ("source:s3://old.md", "answer", 2, ["answer_new"]),
    ]


async def test_no_period_keeps_everything_and_only_the_owner_sets_it(
    database: Database, pool: asyncpg.Pool, owner: asyncpg.Connection
) -> None:
    await append(database, OLD_RECORDS)
    receipt = await retention.apply(database)
    assert receipt["keep_months"] is None and receipt["months_dropped"] == []
    assert receipt["partitions_added"] == 0  # the open partition holds every month
    for table in PARTITIONED:
        assert await partitions(owner, table) == [(f"{table}_p_open", "-infinity", "infinity")]
    assert await owner.fetchval("SELECT count(*) FROM provenance_p_open") == len(OLD_RECORDS)
    assert await owner.fetchval("SELECT count(*) FROM operator_audit") == 0
    with pytest.raises(Forbidden):
        await retention.set_policy(database, 1)
    async with pool.acquire() as connection:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await connection.execute("UPDATE retention_policy SET keep_months = 1")


async def partitions(owner: asyncpg.Connection, table: str) -> list[tuple[str, str, str]]:
    """Each partition of `table` with its bounds, oldest first."""
    rows = await owner.fetch(
        "SELECT partition, lower::text, upper::text FROM lineage_partitions($1::regclass)", table
    )
    return [tuple(row) for row in rows]


async def test_what_was_kept_before_the_period_expires_whole_once_past_it(
    database: Database, owner_database: Database, owner: asyncpg.Connection
) -> None:
    await append(database, OLD_RECORDS + NEW_RECORDS)
    await retention.set_policy(owner_database, 12, now=NOW)
    until = (NOW.replace(day=1) + timedelta(days=32)).replace(day=1, hour=0, minute=0, second=0,
                                                               microsecond=0)  # fmt: skip
    closed = f"_p_until_{until:%Y_%m}"
    for table in PARTITIONED:
        [first, *months] = await partitions(owner, table)
        assert first[0] == f"{table}{closed}" and first[1] == "-infinity"
        assert [name for name, _, _ in months] == [
            f"{table}_p{until:%Y_%m}", f"{table}_p{until + timedelta(days=31):%Y_%m}"
        ]  # fmt: skip
    assert await owner.fetchval(f"SELECT count(*) FROM provenance{closed}") == 5
    # The old records wait for the newest beside them: nothing of the partition goes before.
    assert (await retention.apply(database, NOW))["months_dropped"] == []
    later = until + timedelta(days=366)
    await storage.checkpoint(database, Settings(log_interval_s=0), "default")  # logged first
    receipt = await retention.apply(database, later)
    assert [m["month"] for m in receipt["months_dropped"]] == [f"before {until:%Y-%m}"]
    for table in PARTITIONED:
        assert f"{table}{closed}" not in [name for name, _, _ in await partitions(owner, table)]
    with pytest.raises(NotFound):
        await walks.walk_back(database, Settings(), "default", "answer_new", None)


async def closing_checks(owner: asyncpg.Connection) -> int:
    count: int = await owner.fetchval(
        "SELECT count(*) FROM pg_constraint WHERE conname LIKE '%\\_closing'"
    )
    return count


async def waiting(owner: asyncpg.Connection, query: str) -> None:
    """Returns once a backend running `query` waits for a lock (10 s at most)."""
    for _ in range(500):
        if await owner.fetchval(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid())",
            query,
        ):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"nothing running {query} waits for a lock")


async def test_closing_the_open_partition_reads_its_rows_while_appends_go_on(
    database: Database, owner_database: Database, owner: asyncpg.Connection, database_url: str
) -> None:
    await append(database, OLD_RECORDS)
    reader, holder = await asyncpg.connect(database_url), await asyncpg.connect(database_url)
    try:
        # The reader lets the check be added only once the holder is queued behind it; the
        # holder then keeps the validation of invalidation_postings_p_open waiting.
        reading = reader.transaction()
        await reading.start()
        await reader.execute("SELECT count(*) FROM invalidation_postings_p_open")
        setting = asyncio.create_task(retention.set_policy(owner_database, 12, now=NOW))
        await waiting(owner, "lineage_open_partitions_check")
        holding = holder.transaction()
        await holding.start()
        held = asyncio.create_task(
            holder.execute("LOCK TABLE invalidation_postings_p_open IN SHARE UPDATE EXCLUSIVE MODE")
        )
        await waiting(owner, "LOCK TABLE invalidation_postings_p_open")
        await reading.commit()
        await held
        await waiting(owner, "lineage_open_partitions_validate")
        await asyncio.wait_for(append(database, NEW_RECORDS), 10)  # appends go on
        await holding.commit()
        await asyncio.wait_for(setting, 10)
    finally:
        await reader.close()
        await holder.close()
    until = (NOW.replace(day=1) + timedelta(days=32)).replace(day=1, hour=0, minute=0, second=0,
                                                               microsecond=0)  # fmt: skip
    for table in PARTITIONED:
        [first, *months] = await partitions(owner, table)
        assert first[:2] == (f"{table}_p_until_{until:%Y_%m}", "-infinity")
        assert len(months) == 2
    assert await owner.fetchval(f"SELECT count(*) FROM provenance_p_until_{until:%Y_%m}") == 5
    assert await closing_checks(owner) == 0


async def test_a_set_that_fails_or_stops_half_way_leaves_no_check(
    database: Database, owner_database: Database, owner: asyncpg.Connection
) -> None:
    far = record("far", "document", NOW + timedelta(days=400), source_uri="s3://far.md")
    await append(database, [*OLD_RECORDS, far])
    with pytest.raises(asyncpg.CheckViolationError):  # a record past the bound: nothing changes
        await retention.set_policy(owner_database, 12, now=NOW)
    assert await closing_checks(owner) == 0
    assert (await retention.get_policy(owner_database))["keep_months"] is None
    # As a set stopped after its first step leaves it: the check would refuse next month's
    # appends; the next set, here of no period, drops it.
    await owner.execute("SELECT lineage_open_partitions_check($1, true)", NOW)
    await retention.set_policy(owner_database, 0, now=NOW)
    assert await closing_checks(owner) == 0
    farther = record("farther", "document", NOW + timedelta(days=500), source_uri="s3://x.md")
    await append(database, [farther])


async def test_clearing_the_period_opens_one_partition_after_the_months(
    database: Database, owner_database: Database, owner: asyncpg.Connection
) -> None:
    await retention.set_policy(owner_database, 6, now=NOW)
    months = await partitions(owner, "provenance")
    assert months and all(upper != "infinity" for _, _, upper in months)
    await retention.set_policy(owner_database, 0, now=NOW)
    *kept, opened = await partitions(owner, "provenance")
    assert kept == months and opened[0] == "provenance_p_open"
    assert opened[1] == months[-1][2] and opened[2] == "infinity"
    await append(database, NEW_RECORDS[1:])
    far = record("far", "document", NOW + timedelta(days=400), source_uri="s3://far.md")
    await append(database, [far])
    assert await owner.fetchval("SELECT count(*) FROM provenance_p_open") == 1


async def test_the_partitioned_tables_are_listed_once(owner: asyncpg.Connection) -> None:
    """The functions' list (lineage_partitioned_tables) is the migrations' and the catalog's."""
    listed = await owner.fetchval("SELECT lineage_partitioned_tables()")
    partitioned = await owner.fetchval(
        "SELECT array_agg(relname::text ORDER BY relname) FROM pg_class "
        "WHERE relkind = 'p' AND relnamespace = 'public'::regnamespace"
    )
    assert listed == list(PARTITIONED) and sorted(listed) == partitioned


@pytest.mark.parametrize("keep_months", [0, 12], ids=["one partition", "month partitions"])
async def test_an_id_stays_unique_across_months(
    database: Database, owner_database: Database, keep_months: int
) -> None:
    """Partitions are unique within themselves; the append's check covers the others."""
    await retention.set_policy(owner_database, keep_months)
    await append(database, OLD_RECORDS[:1])
    again = record("doc_old", "document", NOW, source_uri="s3://old.md")
    async with database.tenant("default") as tx:
        inserted = await insert_records(tx, [again])
        count = await tx.connection.fetchval(
            "SELECT count(*) FROM provenance WHERE context_id = 'doc_old'"
        )
    assert inserted == set() and count == 1


async def test_one_id_appended_into_two_months_at_once_is_stored_once(
    database: Database, owner_database: Database, owner: asyncpg.Connection
) -> None:
    """Neither append sees the other's uncommitted row in its month; the second to commit
    checks again behind the first's lock on the tenant's counter, and gives way."""
    await retention.set_policy(owner_database, 12)
    await append(database, OLD_RECORDS[:1])  # the old month's partitions, made beforehand
    first = record("twice", "document", OLD, source_uri="s3://twice.md")
    second = record("twice", "document", NOW, source_uri="s3://twice.md")
    async with database.tenant("default") as tx:
        await insert_records(tx, [first])  # holds the tenant's counter until it commits
        racing = asyncio.create_task(append(database, [second]))
        await asyncio.sleep(0.5)  # the second append waits on the counter
        assert not racing.done()
    with pytest.raises(Conflict, match="twice"):
        await racing
    assert await owner.fetchval("SELECT count(*) FROM provenance WHERE context_id = 'twice'") == 1


async def test_a_month_waits_for_the_log_to_take_its_records_in(
    database: Database, owner_database: Database, settings: Settings
) -> None:
    """Records appended with an old created_at and expired before the log's round would leave
    no leaf: their month is kept until the log has them, then goes."""
    await retention.set_policy(owner_database, 12)
    await append(database, OLD_RECORDS)  # queued for the log, not yet in it
    waiting = await retention.apply(database)
    assert waiting["months_dropped"] == [] and waiting["months_waiting"] == [f"{OLD:%Y-%m}"]
    logged = await storage.checkpoint(database, settings, "default")
    assert logged.checkpoint.tree_size == len(OLD_RECORDS)
    dropped = await retention.apply(database)
    assert [m["month"] for m in dropped["months_dropped"]] == [f"{OLD:%Y-%m}"]
    assert dropped["months_waiting"] == []


async def test_the_parent_check_reads_root_sources_from_the_records_alone(
    database: Database, owner_database: Database, owner: asyncpg.Connection
) -> None:
    """A record keeps its root sources (migration 0036), so the check reads the records by id
    and no other table; unknown and another tenant's ids are absent."""
    await retention.set_policy(owner_database, 12)  # month partitions before the appends
    await append(database, OLD_RECORDS[:2])
    await append(database, NEW_RECORDS)
    await db.fetch(owner, "tenant_create", tenant_id="other")
    async with database.tenant("other") as tx:
        await insert_records(tx, [record("doc_other", "document", NOW, source_uri="s3://o.md")])
    wanted = ["answer_new", "chunk_old", "doc_old", "doc_new", "doc_other", "unknown"]
    query = QUERIES["stored_parents"]
    async with database.tenant("default") as tx:
        stored = await stored_parents(tx, wanted)
        # The plan of tables too large to read whole: a probe of the id index per id.
        await tx.connection.execute(
            "SET LOCAL enable_material = off; SET LOCAL enable_hashjoin = off;"
            "SET LOCAL enable_mergejoin = off; SET LOCAL enable_seqscan = off"
        )
        [plan] = json.loads(
            await tx.connection.fetchval(
                f"EXPLAIN (ANALYZE, FORMAT JSON) {query.sql}",
                *query.arguments({"tenant_id": "default", "context_ids": wanted}),
            )
        )
    assert {key: parent.roots for key, parent in stored.items()} == {
        "answer_new": {"s3://old.md": 2},
        "chunk_old": {"s3://old.md": 1},
        "doc_old": {"s3://old.md": 0},
        "doc_new": {"s3://new.md": 0},
    }

    def relations(node: dict[str, Any]) -> set[str]:
        own = {node["Relation Name"]} if "Relation Name" in node else set()
        return own.union(*(relations(child) for child in node.get("Plans", [])))

    read = relations(plan["Plan"])
    assert len(read) > 2 and all(name.startswith("provenance_p") for name in read), read
