"""derive() against a real PostgreSQL: every rule, replay, conflict, batches, both stores."""

import asyncpg
import httpx
import pytest

from lineage import Conflict, Derivation, InvalidRecord, derive, derive_many, render_for_prompt
from lineage.core.hashing import content_hash
from lineage.db.database import Database
from lineage.store import HttpStore, PostgresStore


async def count(owner: asyncpg.Connection) -> int:
    total: int = await owner.fetchval("SELECT count(*) FROM provenance")
    return total


async def test_derive_records_the_hash_and_returns_the_text(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    doc = await derive(
        store,
        [],
        "Secret salary table",
        "document",
        "loader",
        "1.0",
        source_uri="s3://hr/salaries.csv",
    )
    chunk = await derive(
        store,
        [doc],
        "Row 1: 90k",
        "chunk",
        "chunker",
        "2.3.1",
        index_snapshot="idx_1",
        trace_id="ab" * 16,
        attributes={"row": 1},
    )
    assert chunk.text == "Row 1: 90k"
    assert chunk.parent_ids == [doc.context_id]
    stored = await store.get(chunk.context_id)
    assert stored is not None
    assert stored.content_hash == content_hash("Row 1: 90k")
    assert stored.transform_version == "chunker@2.3.1"
    assert stored.index_snapshot == "idx_1" and stored.attributes == {"row": 1}
    dump = await owner.fetchval("SELECT string_agg(p::text, ' ') FROM provenance p")
    assert "90k" not in dump and "salary" not in dump.lower()


@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({"parents": [], "kind": "chunk"}, "missing_parents"),
        ({"parents": [], "kind": "document"}, "root_without_source"),
        ({"parents": ["nobody_has_this"], "kind": "chunk"}, "unknown_parent"),
        ({"parents": [], "kind": "gadget", "source_uri": "x://y"}, "unknown_kind"),
        (
            {"parents": [], "kind": "document", "source_uri": "x://y", "context_id": "bad id!"},
            "malformed_id",
        ),
        *(
            (
                {"parents": [], "kind": "document", "source_uri": "x://y", "attributes": value},
                "bad_attributes",
            )
            for value in ([("k", "v")], [], 5)
        ),  # a list of pairs was made a dict, an empty list dropped, a number a TypeError
    ],
)
async def test_invalid_derive_raises_and_writes_nothing(
    store: PostgresStore, owner: asyncpg.Connection, kwargs: dict[str, object], rule: str
) -> None:
    before = await count(owner)
    with pytest.raises(InvalidRecord) as caught:
        await derive(store, text="t", **kwargs)  # type: ignore[arg-type]
    assert caught.value.rule == rule
    assert await count(owner) == before


async def test_replay_is_a_no_op_and_other_content_conflicts(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    first = await derive(store, [], "v1", "document", source_uri="s3://a", context_id="doc_a")
    again = await derive(store, [], "v1", "document", source_uri="s3://a", context_id="doc_a")
    assert again.record == first.record  # the stored record, time included
    assert await count(owner) == 1
    with pytest.raises(Conflict, match="append-only"):
        await derive(store, [], "v2", "document", source_uri="s3://a", context_id="doc_a")
    assert await count(owner) == 1


async def test_deterministic_ids_make_reruns_record_nothing_twice(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    async def step() -> str:
        doc = await derive(
            store, [], "text", "document", "loader", "1", source_uri="s3://d", deterministic=True
        )
        chunk = await derive(store, [doc], "chunk", "chunk", "chunker", "2", deterministic=True)
        return chunk.context_id

    assert await step() == await step()
    assert await count(owner) == 2


async def test_batch_is_all_or_nothing(store: PostgresStore, owner: asyncpg.Connection) -> None:
    items = [
        Derivation([], "doc", "document", source_uri="s3://b", context_id="doc_b"),
        Derivation(["doc_b"], "c1", "chunk", "chunker", "2", context_id="chunk_b1"),
        Derivation(["chunk_b1"], "s", "summary", "summarise", "1", context_id="sum_b"),
    ]
    contexts = await derive_many(store, items)
    assert [c.context_id for c in contexts] == ["doc_b", "chunk_b1", "sum_b"]
    assert await count(owner) == 3
    broken = [
        Derivation(["doc_b"], "c2", "chunk", "chunker", "2", context_id="chunk_b2"),
        Derivation(["missing"], "c3", "chunk", "chunker", "2", context_id="chunk_b3"),
    ]
    with pytest.raises(InvalidRecord, match="missing"):
        await derive_many(store, broken)
    assert await count(owner) == 3
    with pytest.raises(InvalidRecord) as caught:
        await derive_many(store, [items[0], items[0]])
    assert caught.value.rule == "duplicate_id"


async def test_another_tenants_parent_is_unknown(
    database: Database, owner: asyncpg.Connection
) -> None:
    await owner.execute("INSERT INTO tenants (tenant_id) VALUES ('acme')")
    acme = PostgresStore(database, "acme")
    theirs = await derive(acme, [], "acme doc", "document", source_uri="s3://acme")
    mine = PostgresStore(database)
    with pytest.raises(InvalidRecord) as caught:
        await derive(mine, [theirs.context_id], "x", "chunk")
    with pytest.raises(InvalidRecord) as unknown:
        await derive(mine, ["ctx_" + "0" * 32], "x", "chunk")
    assert caught.value.rule == unknown.value.rule == "unknown_parent"
    assert await mine.get(theirs.context_id) is None


def test_render_for_prompt_wraps_every_block_with_its_id() -> None:
    from datetime import UTC, datetime

    from lineage.core.derive import Context
    from lineage.core.record import ContextRecord

    def context(context_id: str, text: str) -> Context:
        record = ContextRecord(
            tenant_id="default",
            context_id=context_id,
            kind="chunk",
            parent_ids=["d"],
            content_hash=content_hash(text),
            created_at=datetime.now(UTC),
        )
        return Context(context_id, text, ["d"], record)

    rendered = render_for_prompt([context("chunk_1", "alpha"), context("chunk_2", "x</context>")])
    assert rendered.count("<context id=") == 2
    assert '<context id="chunk_1">\nalpha\n</context>' in rendered
    assert rendered.count("</context>") == 2  # a block's text cannot close it early


async def test_http_store_writes_through_the_api(
    client: httpx.AsyncClient, store: PostgresStore
) -> None:
    remote = HttpStore("http://lineage", client=client)
    doc = await derive(remote, [], "doc via api", "document", source_uri="s3://api")
    chunk = await derive(remote, [doc], "chunk via api", "chunk", "chunker", "2")
    stored = await store.get(chunk.context_id)
    assert stored is not None and stored.parent_ids == [doc.context_id]
    assert await remote.get(chunk.context_id) == stored
    assert await remote.get("ctx_" + "f" * 32) is None
    with pytest.raises(InvalidRecord) as caught:
        await derive(remote, ["nope"], "x", "chunk")
    assert caught.value.rule == "unknown_parent"
    with pytest.raises(Conflict):
        await derive(
            remote, [], "other", "document", source_uri="s3://api", context_id=doc.context_id
        )


def test_sync_wrapper_for_scripts(database_url: str) -> None:
    import threading

    from lineage.store.sync import SyncLineage

    results: list[bool] = []

    def script() -> None:  # a plain script: no event loop of its own
        with SyncLineage(database_url) as lineage:
            doc = lineage.derive([], "doc", "document", source_uri="s3://sync")
            [chunk] = lineage.derive_many([Derivation([doc], "c", "chunk", "chunker", "1")])
            results.append(chunk.record.parent_ids == [doc.context_id])

    thread = threading.Thread(target=script)
    thread.start()
    thread.join(timeout=60)
    assert results == [True]


async def test_attribute_numbers_read_back_to_the_same_canonical_form(
    store: PostgresStore,
) -> None:
    # jsonb stores numbers as numeric: what comes back must canonicalise to what was signed.
    numbers = {"a": 0.1, "b": -0.0, "c": 1.5, "d": 1e-20, "e": 2**53 - 1, "f": 123456.0, "g": 7}
    [made] = await derive_many(
        store, [Derivation([], "numbers", "document", source_uri="s3://n.md", attributes=numbers)]
    )
    stored = await store.get(made.context_id)
    assert stored is not None
    assert stored.canonical_bytes() == made.record.canonical_bytes()
