"""Invalidation postings (migration 0028): what an append computes for each record, and that
invalidation by postings answers exactly what the walk down the edges answers (rows, kinds,
depths, order, truncated), on a random DAG of chunker versions and index snapshots."""

import random
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from lineage.core.derive import Derivation, derive_many
from lineage.core.record import ContextRecord, NewContext
from lineage.db.database import Database
from lineage.services import appends
from lineage.services.postings import append_arguments, batch_postings, postings_of
from lineage.store.postgres import PostgresStore
from tests.walks_helpers import run_sql

NOW = "2026-12-01T00:00:00Z"
NOW_STAMP = datetime(2026, 12, 1, tzinfo=UTC)


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
def test_the_append_lists_each_key_once_and_groups_postings_by_key_kind_depth_and_month() -> None:
    uuid_id = "0b6f4c1e-2f6a-4c57-9a0d-6f3c1d2e4b5a"
    batch = [
        record("d1", []),
        record(uuid_id, ["d1"], transform="chunker", transform_version='a@1,"{x}\\'),
        record("A" + uuid_id[1:], ["d1"], transform="chunker", transform_version='a@1,"{x}\\'),
    ]
    roots = [{"s3://d1.md": 0}, {"s3://d1.md": 1}, {"s3://d1.md": 1}]
    postings: list[dict[str, int] | None] = [{}, {'transform_version:a@1,"{x}\\': 0}, None]
    arguments = append_arguments(batch, roots, postings)
    # Keys travel as text[] elements, whatever they hold; records name them by position.
    assert arguments["keys"] == ["source:s3://d1.md", 'transform_version:a@1,"{x}\\']
    assert arguments["is_uuids"] == [False, True, False]  # in capitals it would print otherwise
    assert arguments["root_source_lists"] == ["{1}", "{1}", "{1}"]
    assert arguments["root_depth_lists"] == ["{0}", "{1}", "{1}"]
    assert arguments["upstream_key_lists"] == ["{}", "{2}", None]  # None: unknown postings
    assert arguments["upstream_depth_lists"] == ["{}", "{0}", None]
    rows = sorted(
        zip(
            arguments["posting_keys"],
            arguments["posting_kinds"],
            arguments["posting_depths"],
            arguments["posting_uuid_lists"],
            arguments["posting_id_lists"],
            strict=True,
        ),
        key=str,
    )
    assert rows == [
        (1, "chunk", 1, "{" + uuid_id + "}", '{"A' + uuid_id[1:] + '"}'),
        (1, "document", 0, None, '{"d1"}'),
        (2, "chunk", 0, "{" + uuid_id + "}", None),
    ]


async def test_the_append_refuses_an_id_marked_as_a_uuid_that_would_print_otherwise(
    database: Database,
) -> None:
    """An id kept as uuid reads back as uuid prints it: an id in capitals marked as a UUID
    would change, so lineage_append refuses the batch and stores nothing of it."""
    in_capitals = "0B6F4C1E-2F6A-4C57-9A0D-6F3C1D2E4B5A"
    proposal = NewContext(
        context_id=in_capitals, kind="document", source_uri="s3://u.md",
        content_hash="sha256:" + "0" * 64,
    )  # fmt: skip
    async with database.tenant("default") as tx:
        columns = appends._columns([proposal.stamped("default", NOW_STAMP)], tx.signer, {}, {})
        assert columns["is_uuids"] == [False]
        columns["is_uuids"] = [True]
        with pytest.raises(asyncpg.InvalidParameterValueError, match="print back as itself"):
            await tx.fetch("append_records", tenant_token=tx.token, **columns)
    assert await PostgresStore(database).get(in_capitals) is None


@pytest.mark.unit
def test_a_postings_row_holds_at_most_1000_ids_of_each_form_in_id_order() -> None:
    chunks = [record(f"c{n:04}", ["d"]) for n in range(2500)]
    arguments = append_arguments(chunks[::-1], [{"s3://d.md": 1}] * 2500, [{}] * 2500)
    lists = arguments["posting_id_lists"]
    assert [len(ids.split(",")) for ids in lists] == [1000, 1000, 500]
    assert ",".join(ids[1:-1] for ids in lists) == ",".join(f'"c{n:04}"' for n in range(2500))
    assert arguments["posting_uuid_lists"] == [None] * 3


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
