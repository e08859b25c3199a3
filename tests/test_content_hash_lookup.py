"""The lookup of records by content hash (sql/newest_by_content_hash.sql): the newest record
with exactly that hash, found by a probe of the content-hash index as the application role.
Under row security an index condition must be leakproof: a key made by a function that is not
(a digest of the text cast to bytea) would turn the probe into a scan of the tenant's records."""

import asyncpg

from lineage.core.record import NewContext
from lineage.db.database import Database
from lineage.services import auth, reads
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.walks_helpers import explain_as_app

CHUNK_TEXT_HASH = "sha256:" + "a" * 64


def document(context_id: str, content_hash: str) -> NewContext:
    return NewContext(
        context_id=context_id, kind="document", source_uri=f"s3://{context_id}.md",
        content_hash=content_hash,
    )  # fmt: skip


async def test_the_newest_record_with_the_hash_is_one_probe_of_the_index(
    store: PostgresStore, database: Database, pool: asyncpg.Pool, owner: asyncpg.Connection
) -> None:
    await store.append([document(f"other_{n}", f"sha256:{n:064x}") for n in range(200)])
    await store.append([document("first", CHUNK_TEXT_HASH)])
    await store.append([document("second", CHUNK_TEXT_HASH)])
    await owner.execute("ANALYZE provenance")
    found = await reads.run(
        database, Settings(), "newest_by_content_hash",
        tenant_id="default", content_hashes=[CHUNK_TEXT_HASH, "sha256:" + "b" * 64],
    )  # fmt: skip
    assert [(row["content_hash"], row["context_id"]) for row in found] == [
        (CHUNK_TEXT_HASH, "second")
    ]
    plan = await explain_as_app(
        pool, "newest_by_content_hash", tenant_id="default", content_hashes=[CHUNK_TEXT_HASH]
    )
    reads_of_records = [n for n in plan if n.get("Relation Name", "").startswith("provenance")]
    assert reads_of_records and all(
        n["Node Type"] in {"Index Scan", "Index Only Scan", "Bitmap Heap Scan"}
        for n in reads_of_records
    ), [(n["Node Type"], n.get("Index Name")) for n in plan]


async def test_a_hash_another_tenant_recorded_later_is_not_the_answer(
    database: Database, owner_database: Database, owner: asyncpg.Connection
) -> None:
    """The hash index holds every tenant's records with a hash: the lookup keeps its own."""
    assert await auth.create_tenant(owner_database, "beside")
    await PostgresStore(database, "default").append([document("ours", CHUNK_TEXT_HASH)])
    await PostgresStore(database, "beside").append([document("theirs", CHUNK_TEXT_HASH)])
    await owner.execute("ANALYZE provenance")
    for tenant, expected in (("default", "ours"), ("beside", "theirs")):
        found = await reads.run(
            database, Settings(), "newest_by_content_hash",
            tenant_id=tenant, content_hashes=[CHUNK_TEXT_HASH],
        )  # fmt: skip
        assert [row["context_id"] for row in found] == [expected]
