"""Invalidation keys by number (migration 0038): a record keeps its root sources and upstream
keys as numbers in its tenant's invalidation_keys, which the append fills the first time a key
comes; appends that bring the same new key at once number it once."""

import asyncio

import asyncpg

from lineage.core.record import NewContext
from lineage.db.database import Database
from lineage.services.transaction_store import TransactionStore
from lineage.store.postgres import PostgresStore
from tests.conftest import database_at

HANG_GUARD_S = 30
# The lock under which lineage_append numbers a tenant's new keys.
NUMBERING_LOCK = (
    "SELECT pg_advisory_xact_lock(hashtextextended('invalidation_keys/' || $1 || '/' || $2, 0))"
)
# Each record's root sources and upstream keys, named.
NAMED = """
SELECT p.context_id,
       ARRAY(SELECT k.key FROM unnest(p.root_sources) WITH ORDINALITY AS r (no, o)
             JOIN invalidation_keys AS k ON k.tenant_id = p.tenant_id AND k.key_no = r.no
             ORDER BY r.o) AS roots,
       ARRAY(SELECT k.key FROM unnest(p.upstream_keys) WITH ORDINALITY AS u (no, o)
             JOIN invalidation_keys AS k ON k.tenant_id = p.tenant_id AND k.key_no = u.no
             ORDER BY u.o) AS upstream
FROM provenance AS p WHERE p.tenant_id = 'default' ORDER BY p.context_id
"""


# The tenant's keys the transaction read, by scan or by index.
KEYS_READ = (
    "SELECT pg_stat_get_xact_tuples_returned('invalidation_keys'::regclass)"
    " + pg_stat_get_xact_tuples_fetched('invalidation_keys'::regclass)"
)


def chunk(context_id: str, parent_id: str) -> NewContext:
    return NewContext(
        context_id=context_id, parent_ids=[parent_id], kind="chunk",
        content_hash="sha256:" + "1" * 64,
    )  # fmt: skip


def document(context_id: str, source_uri: str) -> NewContext:
    return NewContext(
        context_id=context_id, kind="document", source_uri=source_uri,
        content_hash="sha256:" + "0" * 64,
    )  # fmt: skip


async def wait_until_both_wait_for_a_lock(owner: asyncpg.Connection) -> None:
    query = (
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    for _ in range(int(HANG_GUARD_S / 0.01)):
        if await owner.fetchval(query) >= 2:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the two appends never both waited for the tenant's key counter")


async def test_appends_that_bring_one_new_key_at_once_number_it_once(
    database: Database, owner: asyncpg.Connection
) -> None:
    store = PostgresStore(database)
    await store.append([document("first", "s3://first.md")])
    # Held in a transaction of its own: a transaction sees pg_stat_activity frozen.
    async with database.tenant("default") as locker:
        await locker.connection.execute(NUMBERING_LOCK, locker.token, "default")
        appends = [
            asyncio.create_task(store.append([document(name, "s3://shared.md")]))
            for name in ("doc_a", "doc_b")
        ]
        # Both saw the key missing before either could number it.
        await wait_until_both_wait_for_a_lock(owner)
    async with asyncio.timeout(HANG_GUARD_S):
        await asyncio.gather(*appends)
    keys = await owner.fetch("SELECT key_no, key FROM invalidation_keys ORDER BY key_no")
    assert [(row["key_no"], row["key"]) for row in keys] == [
        (1, "source:s3://first.md"),
        (2, "source:s3://shared.md"),
    ]
    named = {row["context_id"]: list(row["roots"]) for row in await owner.fetch(NAMED)}
    assert named == {
        "first": ["source:s3://first.md"],
        "doc_a": ["source:s3://shared.md"],
        "doc_b": ["source:s3://shared.md"],
    }


async def test_a_child_names_what_its_parents_carry_and_its_own_keys(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    """Keys a parent brought are numbered once and carried down by number; keys of the child's
    own (its transform version, its index snapshot) join them."""
    await store.append([document("doc", "s3://a.md")])
    chunk = NewContext(
        context_id="chunk", parent_ids=["doc"], kind="chunk", content_hash="sha256:" + "1" * 64,
        transform="chunker", transform_version="chunker@1.0",
    )  # fmt: skip
    retrieval = NewContext(
        context_id="retrieval", parent_ids=["chunk"], kind="retrieval",
        content_hash="sha256:" + "2" * 64, index_snapshot="idx-1",
    )  # fmt: skip
    await store.append([chunk])
    await store.append([retrieval])
    named = {
        row["context_id"]: (list(row["roots"]), sorted(row["upstream"]))
        for row in await owner.fetch(NAMED)
    }
    assert named["retrieval"] == (
        ["source:s3://a.md"],
        ["index_snapshot:idx-1", "transform_version:chunker@1.0"],
    )
    assert named["chunk"] == (["source:s3://a.md"], ["transform_version:chunker@1.0"])
    numbers = await owner.fetch("SELECT key_no FROM invalidation_keys ORDER BY key_no")
    assert [row["key_no"] for row in numbers] == [1, 2, 3]


async def test_a_long_session_reads_a_batchs_keys_not_all_of_the_tenants(
    database_url: str,
) -> None:
    """Appends of new documents, each its own key, through one connection on tables never
    analyzed: the append that follows 3,000 keys reads about its own keys, not every key of the
    tenant (a cached generic plan read them all, and appends slowed with every key stored)."""
    async with database_at(database_url, max_size=1) as database:
        store = PostgresStore(database)
        for batch in range(6):  # past the five calls after which a session may keep a plan
            await store.append(
                [document(f"doc_{batch}_{n}", f"s3://many/{batch}/{n}") for n in range(500)]
            )
        reads = []
        for late in (
            [document(f"late_{n}", f"s3://late/{n}") for n in range(10)],
            # Children of stored documents: their parents' keys are read by number.
            [chunk(f"late_chunk_{n}", f"doc_5_{n}") for n in range(10)],
        ):
            async with database.tenant("default") as tx:
                await TransactionStore(tx).append(late)
                reads.append(await tx.connection.fetchval(KEYS_READ))
    assert max(reads) <= 100, f"{reads} keys read for 10 records beside 3,000"
