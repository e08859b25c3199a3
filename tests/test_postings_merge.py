"""The background round merges small postings rows (migration 0049): a key posted in many
appends ends in rows of 1,000 ids, every invalidation and blast radius answers what it answered
before, and nothing a concurrent append writes is lost."""

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest
from prometheus_client import REGISTRY

from lineage.core.derive import Derivation, derive_many
from lineage.db.database import Database
from lineage.services import postings_merge
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from lineage.verifiable_log import storage
from tests.test_postings import QUESTIONS, random_dag
from tests.walks_helpers import run_sql

# Every posting as (key, kind, depth, id), and the ids in each row as a row holds them.
POSTINGS = """
SELECT k.key, ip.kind, ip.depth, ip.created_at,
       ARRAY(SELECT u::text FROM unnest(ip.context_uuids) AS u) AS uuids,
       coalesce(ip.context_ids, '{}') AS ids
FROM invalidation_postings AS ip
JOIN invalidation_keys AS k ON k.tenant_id = ip.tenant_id AND k.key_no = ip.key_no
WHERE ip.tenant_id = 'default'
"""


async def postings(owner: asyncpg.Connection) -> list[dict[str, Any]]:
    async with owner.transaction():
        await owner.execute("SET LOCAL lineage.tenant_id = 'default'")
        return [dict(row) for row in await owner.fetch(POSTINGS)]


def listed(rows: list[dict[str, Any]]) -> list[tuple[str, str, int, str]]:
    """Each posting once per time a row lists it, sorted."""
    return sorted(
        (row["key"], row["kind"], row["depth"], context_id)
        for row in rows
        for context_id in row["uuids"] + row["ids"]
    )


async def document(store: PostgresStore, name: str) -> None:
    """A document `name` whose source is s3://<name>.md."""
    await derive_many(
        store, [Derivation([], "doc", "document", source_uri=f"s3://{name}.md", context_id=name)]
    )


async def chunk_rows(owner: asyncpg.Connection, name: str) -> list[dict[str, Any]]:
    """The postings rows that list chunks under document `name`'s source."""
    return [row for row in await postings(owner)
            if row["key"] == f"source:s3://{name}.md" and row["kind"] == "chunk"]  # fmt: skip


def chunks(document: str, numbers: range) -> list[Derivation]:
    """Chunks of one document; every other id a UUID (kept as uuid), the rest text."""
    return [
        Derivation(
            [document],
            f"chunk {n}",
            "chunk",
            context_id=str(uuid.UUID(int=n)) if n % 2 else f"{document}_chunk_{n:05}",
        )
        for n in numbers
    ]


async def the_answers(pool: asyncpg.Pool, sources: list[str]) -> dict[Any, Any]:
    found: dict[Any, Any] = {}
    for name, start in QUESTIONS:
        for kind in ("answer", "any", "all"):
            for max_depth in (0, 2, 20):
                found[(name, kind, max_depth)] = await run_sql(
                    pool, name, tenant_id="default", kind=kind, max_depth=max_depth, **start
                )
    for source_uri in sources:
        for name in ("blast_radius_ids_by_source", "blast_radius_by_source"):
            found[(name, source_uri)] = await run_sql(
                pool, name, tenant_id="default", source_uri=source_uri, kind="all", max_depth=20
            )
    return found


async def test_merged_postings_answer_what_the_appended_rows_answered(
    store: PostgresStore, database: Database, owner: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    """A random DAG appended a record at a time: every key gains a row per record. Merged, the
    rows are fewer, list the same postings, and every question answers the same rows."""
    dag = random_dag(4, 400)
    for item in dag:
        await derive_many(store, [item])
    sources = [f"s3://d{i}.md" for i in range(8)]
    before_rows = await postings(owner)
    before = await the_answers(pool, sources)
    assert any(rows for rows in before.values())

    done = await postings_merge.merge_pending(database)

    after_rows = await postings(owner)
    assert done["default"].records == len(dag)
    assert done["default"].rows_merged > done["default"].rows_written > 0
    assert len(after_rows) == len(before_rows) - done["default"].rows_merged + (
        done["default"].rows_written
    )
    assert len(after_rows) < len(before_rows) / 3
    assert listed(after_rows) == listed(before_rows)
    assert await the_answers(pool, sources) == before


async def test_a_key_posted_in_many_appends_ends_in_rows_of_a_thousand_in_id_order(
    store: PostgresStore, database: Database, owner: asyncpg.Connection
) -> None:
    await document(store, "hot")
    for first in range(0, 2500, 10):
        await derive_many(store, chunks("hot", range(first, first + 10)))
    hot = await chunk_rows(owner, "hot")
    assert len(hot) == 250

    await postings_merge.merge_pending(database)

    merged = sorted(await chunk_rows(owner, "hot"),
                    key=lambda row: row["uuids"][:1] + row["ids"][:1])  # fmt: skip
    assert [(len(row["uuids"]), len(row["ids"])) for row in merged] == [
        (1000, 1000), (250, 250)
    ]  # fmt: skip
    for row in merged:
        assert row["uuids"] == sorted(row["uuids"]) and row["ids"] == sorted(row["ids"])
    assert listed(merged) == listed(hot)
    # The month partition the rows lie in is the one the records' lie in.
    assert {row["created_at"] for row in merged} == {min(row["created_at"] for row in hot)}
    # Caught up: the counter is at the events, and the next round has nothing to do.
    assert await postings_merge.merge_pending(database) == {}


async def test_fewer_than_eight_small_rows_wait_and_a_row_of_a_hundred_ids_stays(
    store: PostgresStore, database: Database, owner: asyncpg.Connection
) -> None:
    await document(store, "few")

    async def sizes() -> list[int]:
        return sorted(len(row["uuids"]) + len(row["ids"]) for row in await chunk_rows(owner, "few"))

    await derive_many(store, chunks("few", range(1000, 1100)))
    for first in range(0, 7):
        await derive_many(store, chunks("few", range(first, first + 1)))
    await postings_merge.merge_pending(database)
    assert await sizes() == [1] * 7 + [100]
    await derive_many(store, chunks("few", range(7, 8)))
    await postings_merge.merge_pending(database)
    assert await sizes() == [8, 100]


async def test_an_append_while_a_merge_runs_loses_nothing_and_a_second_merge_gives_way(
    store: PostgresStore, database: Database, database_url: str, owner: asyncpg.Connection
) -> None:
    await document(store, "busy")
    for first in range(0, 200, 10):
        await derive_many(store, chunks("busy", range(first, first + 10)))
    merging = await asyncpg.connect(database_url)
    try:
        transaction = merging.transaction()
        await transaction.start()
        [first_merge] = await merging.fetch("SELECT * FROM lineage_postings_merge('default', 100)")
        assert first_merge["rows_merged"] > 0
        # Another process's merge of the tenant gives way at once.
        async with database.connection() as connection:
            [second] = await connection.fetch(
                "SELECT * FROM lineage_postings_merge('default', 100)"
            )
        assert (second["records"], second["rows_merged"]) == (0, 0)
        # Appends go on while the merge is uncommitted, under the same key.
        await asyncio.wait_for(derive_many(store, chunks("busy", range(200, 230))), timeout=10)
        await transaction.commit()
    finally:
        await merging.close()
    await postings_merge.merge_pending(database)
    ids = [i for row in await chunk_rows(owner, "busy") for i in row["uuids"] + row["ids"]]
    assert sorted(ids) == sorted(str(item.context_id) for item in chunks("busy", range(230)))


def merged_rows(rows: str) -> float:
    return REGISTRY.get_sample_value("lineage_postings_rows_total", {"rows": rows}) or 0.0


async def test_the_background_round_merges_and_counts_the_rows(
    store: PostgresStore, database: Database, owner: asyncpg.Connection
) -> None:
    await document(store, "bg")
    for first in range(0, 100, 5):
        await derive_many(store, chunks("bg", range(first, first + 5)))
    merged, written = merged_rows("merged"), merged_rows("written")
    await storage.run_once(database, Settings(auth="none"))
    rows = await chunk_rows(owner, "bg")
    assert len(rows) == 1 and len(rows[0]["uuids"]) + len(rows[0]["ids"]) == 100
    assert merged_rows("merged") - merged == 20
    assert merged_rows("written") - written == 1


async def test_a_merge_asked_for_no_records_is_refused(database: Database) -> None:
    async with database.connection() as connection:
        with pytest.raises(asyncpg.InvalidParameterValueError, match="positive number of records"):
            await connection.fetch("SELECT * FROM lineage_postings_merge('default', 0)")
