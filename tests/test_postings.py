"""Invalidation postings (migration 0028): what an append computes for each record, and that
invalidation by postings answers exactly what the walk down the edges answers (rows, kinds,
depths, order, truncated), on a random DAG of chunker versions and index snapshots."""

import random
import uuid
from typing import Any

import asyncpg
import pytest

from lineage.core.derive import Derivation, derive_many
from lineage.core.record import ContextRecord
from lineage.services.postings import array_literals, batch_postings, postings_of
from lineage.store.postgres import PostgresStore
from tests.walks_helpers import run_sql

NOW = "2026-12-01T00:00:00Z"


def record(context_id: str, parents: list[str], **fields: Any) -> ContextRecord:
    return ContextRecord(
        tenant_id="default",
        context_id=context_id,
        parent_ids=parents,
        kind="chunk" if parents else "document",
        source_uri=None if parents else f"s3://{context_id}.md",
        content_hash="sha256:" + "0" * 64,
        created_at=NOW,
        **fields,
    )


@pytest.mark.unit
def test_a_record_carries_its_parents_postings_a_level_down_and_its_own_at_depth_0() -> None:
    chunk = record("c", ["d"], transform="chunker", transform_version="chunker@2")
    parents = [{"index_snapshot:s1": 0, "transform_version:loader@1": 2}, {"index_snapshot:s1": 3}]
    assert postings_of(chunk, parents) == {
        "index_snapshot:s1": 1,
        "transform_version:loader@1": 3,
        "transform_version:chunker@2": 0,
    }
    assert postings_of(chunk, [None, {}]) is None  # a parent stored before postings


@pytest.mark.unit
def test_a_batch_carries_postings_through_its_own_records_in_order() -> None:
    batch = [
        record("c1", ["d"], transform="chunker", transform_version="chunker@1"),
        record("s1", ["c1", "d"], index_snapshot="idx_1"),
        record("a1", ["s1"]),
        record("orphan", ["old"]),
    ]
    found = batch_postings(batch, {"d": {}, "old": None})
    assert found == [
        {"transform_version:chunker@1": 0},
        {"transform_version:chunker@1": 1, "index_snapshot:idx_1": 0},
        {"transform_version:chunker@1": 2, "index_snapshot:idx_1": 1},
        None,
    ]


@pytest.mark.unit
def test_keys_that_hold_commas_quotes_and_braces_are_quoted_for_postgresql() -> None:
    keys, depths = array_literals([{'transform_version:a@1,"{x}\\': 2}, None, {}])
    assert keys == ['{"transform_version:a@1,\\"{x}\\\\"}', None, "{}"]
    assert depths == ["{2}", None, "{}"]


def random_dag(seed: int, size: int) -> list[Derivation]:
    """Documents, then records of random parents among earlier ones, with a few chunker versions
    and index snapshots spread over them; a record's id is plain text, a UUID (which the
    postings keep as uuid, migration 0048) or a UUID in capitals (kept as text)."""
    rng = random.Random(seed)
    items = [
        Derivation([], f"doc {i}", "document", source_uri=f"s3://d{i}.md", context_id=f"d{i}")
        for i in range(8)
    ]
    ids = [item.context_id for item in items]
    for number in range(size):
        form = str(uuid.UUID(int=rng.getrandbits(128)))
        context_id = rng.choice((f"r{number}", form, form.upper()))
        parents = rng.sample(ids, k=min(len(ids), rng.choice((1, 1, 2, 3))))
        kind = rng.choice(("chunk", "summary", "answer", "claim"))
        version = rng.choice((None, None, "1", "2"))
        item = Derivation(
            [p for p in parents if p is not None],
            f"record {number}",
            kind,
            transform="chunker" if version else None,
            version=version,
            index_snapshot=rng.choice((None, None, None, "idx_a", "idx_b")),
            context_id=context_id,
        )
        items.append(item)
        ids.append(context_id)
    return items


QUESTIONS = [
    ("invalidate_ids_by_transform_version", {"transform_version": "chunker@1"}),
    ("invalidate_by_transform_version", {"transform_version": "chunker@2"}),
    ("invalidate_ids_by_index_snapshot", {"index_snapshot": "idx_a"}),
    ("invalidate_by_index_snapshot", {"index_snapshot": "idx_b"}),
]


async def answers(pool: asyncpg.Pool) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    found = {}
    for name, start in QUESTIONS:
        for kind in ("answer", "any", "all", "chunk"):
            for max_depth in (0, 1, 2, 20):
                found[(name, kind, max_depth)] = await run_sql(
                    pool, name, tenant_id="default", kind=kind, max_depth=max_depth, **start
                )
    return found


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_postings_answer_what_the_walk_answers(
    store: PostgresStore, owner: asyncpg.Connection, pool: asyncpg.Pool, seed: int
) -> None:
    await derive_many(store, random_dag(seed, 300))
    by_postings = await answers(pool)
    assert any(rows for rows in by_postings.values())
    assert any(row["truncated"] for rows in by_postings.values() for row in rows)
    # One record stored as before migration 0028, without postings: the tenant is walked.
    await store_without_postings(owner)
    by_walk = await answers(pool)
    for question, rows in by_walk.items():
        assert by_postings[question] == rows, question


async def test_truncated_says_records_of_the_kind_asked_lie_deeper(
    store: PostgresStore, owner: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    """A chunk at depth 1 and a summary below it: asked for chunks to depth 1, nothing of the
    kind lies deeper, so the answer is whole; asked for summaries, it is cut. By the postings
    and by the walk alike."""
    await derive_many(
        store,
        [
            Derivation([], "doc", "document", "loader", "7", source_uri="s3://t.md",
                       context_id="t_doc"),
            Derivation(["t_doc"], "chunk", "chunk", context_id="t_chunk"),
            Derivation(["t_chunk"], "summary", "summary", context_id="t_summary"),
        ],
    )  # fmt: skip

    async def truncated(kind: str) -> list[bool]:
        rows = await run_sql(pool, "invalidate_ids_by_transform_version", tenant_id="default",
                             transform_version="loader@7", kind=kind, max_depth=1)  # fmt: skip
        return [row["truncated"] for row in rows]

    assert await truncated("chunk") == [False]
    assert await truncated("document") == [False]
    await store_without_postings(owner)
    assert await truncated("chunk") == [False]
    assert await truncated("document") == [False]
    assert await truncated("all") == [True, True]


async def store_without_postings(owner: asyncpg.Connection) -> None:
    await owner.execute(
        "INSERT INTO provenance (tenant_id, context_id, kind, source_uri, content_hash, "
        "created_at) VALUES ('default', 'before_postings', 'document', 's3://old.md', "
        "'sha256:00', now())"
    )
