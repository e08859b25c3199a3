"""Root sources (migration 0005): the one-lookup blast radius by source (records, and ids
alone) gives exactly the rows the walk gives, on random DAGs appended in random batches, and
the migration's backfill of existing records matches what the append path writes."""

import uuid
from typing import Any

import asyncpg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage import db
from lineage.core.record import NewContext
from lineage.db.database import Database
from lineage.db.migrate import downgrade, migrate
from lineage.services import reads
from lineage.services.demo import load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore

# An independent oracle: the textbook walk down parent_ids (UNION over (id, depth), then each
# id's minimal depth), which neither the postings nor the edge table take part in.
WALK_BY_SOURCE = """
WITH RECURSIVE down (context_id, depth) AS (
    SELECT s.context_id, 0 FROM provenance AS s WHERE s.tenant_id = $1 AND s.source_uri = $2
  UNION
    SELECT c.context_id, d.depth + 1
    FROM down AS d JOIN provenance AS c
      ON c.tenant_id = $1 AND c.parent_ids @> ARRAY[d.context_id]
    WHERE d.depth <= $4
),
best AS (SELECT context_id, min(depth) AS depth FROM down GROUP BY context_id)
SELECT r.context_id, b.depth, r.kind,
       EXISTS (SELECT 1 FROM best AS deeper WHERE deeper.depth = $4 + 1) AS truncated
FROM best AS b
JOIN provenance AS r ON r.tenant_id = $1 AND r.context_id = b.context_id
WHERE b.depth <= $4
  AND (r.kind = $3 OR $3 = 'all' OR ($3 = 'any' AND r.kind NOT IN ('verdict', 'tombstone')))
ORDER BY b.depth, r.context_id
"""
SOURCES = ("s3://a.md", "s3://b.md", "s3://c.md")
Node = tuple[list[int], int | None, str]  # parents (earlier nodes), source index, kind
# A node's id: plain text, a UUID (the postings keep it as uuid, migration 0048), or a UUID in
# capitals (kept as text).
ID_FORMS = (
    lambda index: f"n{index}",
    lambda index: str(uuid.UUID(int=index + 1)),
    lambda index: str(uuid.UUID(int=index + 1)).upper(),
)


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[Node], list[int], list[int]]:
    """Nodes whose parents come earlier; roots take one of few sources (revisions); a derived
    node sometimes carries a source too, which sends that source to the walk. With the form of
    each node's id (ID_FORMS)."""
    nodes: list[Node] = []
    for index in range(draw(st.integers(1, 18))):
        parents = (
            draw(st.lists(st.integers(0, index - 1), max_size=3, unique=True)) if index else []
        )
        if parents:
            source = draw(st.one_of(st.none(), st.integers(0, 2))) if draw(st.booleans()) else None
            kind = draw(st.sampled_from(["chunk", "summary", "answer", "verdict"]))
        else:
            source, kind = draw(st.integers(0, 2)), "document"
        nodes.append((parents, source, kind))
    cuts = sorted(draw(st.lists(st.integers(1, len(nodes)), max_size=3, unique=True)))
    forms = draw(
        st.lists(st.integers(0, len(ID_FORMS) - 1), min_size=len(nodes), max_size=len(nodes))
    )
    return nodes, cuts, forms


async def append_dag(
    database: Database, owner: asyncpg.Connection, nodes: list[Node], cuts: list[int],
    forms: list[int],
) -> str:  # fmt: skip
    tenant = f"t{uuid.uuid4().hex[:12]}"
    await db.fetch(owner, "tenant_create", tenant_id=tenant)
    ids = [ID_FORMS[form](index) for index, form in enumerate(forms)]
    records = [
        NewContext(
            context_id=ids[index],
            parent_ids=[ids[p] for p in parents],
            kind=kind,
            source_uri=None if source is None else SOURCES[source],
            content_hash="sha256:" + f"{index:064x}",
        )
        for index, (parents, source, kind) in enumerate(nodes)
    ]
    store = PostgresStore(database, tenant)
    for start, end in zip([0, *cuts], [*cuts, len(records)], strict=True):
        if records[start:end]:
            await store.append(records[start:end])
    return tenant


def essentials(rows: list[Any]) -> list[tuple[str, int, str]]:
    return [(r["context_id"], r["depth"], r["kind"]) for r in rows]


def truncation(rows: list[Any]) -> bool:
    return any(r["truncated"] for r in rows)


async def check_against_the_walk(
    database: Database, owner: asyncpg.Connection, tenant: str, source_uri: str, kind: str,
    max_depth: int,
) -> None:  # fmt: skip
    """Both queries list exactly the walk's rows. Truncated is true when records of the kind
    lie deeper than max_depth (then the walk says so too), and only when the walk says so."""
    walked = await owner.fetch(WALK_BY_SOURCE, tenant, source_uri, kind, max_depth)
    unbounded = await owner.fetch(WALK_BY_SOURCE, tenant, source_uri, kind, 100)
    deeper = any(r["depth"] > max_depth for r in unbounded)
    for name in ("blast_radius_by_source", "blast_radius_ids_by_source"):
        answered = await reads.run(
            database, Settings(), name,
            tenant_id=tenant, source_uri=source_uri, kind=kind, max_depth=max_depth,
        )  # fmt: skip
        context = (name, source_uri, kind, max_depth)
        assert essentials(answered) == essentials(walked), context
        # A listing with no row has nowhere to say it (as the walk has not).
        assert (deeper and bool(answered)) <= truncation(answered) <= truncation(walked), context


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    dag=dags(),
    max_depth=st.sampled_from([0, 1, 2, 20]),
    kind=st.sampled_from(["all", "any", "answer"]),
)
async def test_blast_radius_by_source_matches_the_walk(
    database: Database,
    owner: asyncpg.Connection,
    dag: tuple[list[Node], list[int], list[int]],
    max_depth: int,
    kind: str,
) -> None:
    tenant = await append_dag(database, owner, *dag)
    for source_uri in SOURCES:
        await check_against_the_walk(database, owner, tenant, source_uri, kind, max_depth)


# Each record's root sources as it keeps them, and as the postings list them by source.
KEPT_ROOTS = """
SELECT p.tenant_id, p.context_id, substr(k.key, length('source:') + 1) AS source_uri, r.depth
FROM provenance AS p
CROSS JOIN LATERAL unnest(p.root_sources, p.root_depths) AS r (key_no, depth)
JOIN invalidation_keys AS k ON k.tenant_id = p.tenant_id AND k.key_no = r.key_no
ORDER BY 1, 2, 3
"""
POSTED_ROOTS = """
SELECT ip.tenant_id, posting.context_id, substr(k.key, length('source:') + 1) AS source_uri,
       ip.depth, ip.kind
FROM invalidation_postings AS ip
CROSS JOIN LATERAL unnest(ip.context_uuids::text[] || ip.context_ids) AS posting (context_id)
JOIN invalidation_keys AS k ON k.tenant_id = ip.tenant_id AND k.key_no = ip.key_no
WHERE k.key LIKE 'source:%'
ORDER BY 1, 2, 3
"""


async def test_the_backfill_matches_what_appends_write(
    database_url: str, store: PostgresStore, owner: asyncpg.Connection
) -> None:
    """From before the side table (0004) through it (0005) to the postings (0036), and back
    down from the postings (0035) and up again: what the append wrote each time."""
    await load_incident(store)
    kept = [tuple(row) for row in await owner.fetch(KEPT_ROOTS)]
    posted = [tuple(row) for row in await owner.fetch(POSTED_ROOTS)]
    assert {row[1] for row in kept} >= {"answer_1", "doc_contractors_v1"}
    assert [row[:4] for row in posted] == kept
    for revision in ("0035", "0004"):
        downgrade(database_url, revision)
        migrate(database_url)
        assert [tuple(row) for row in await owner.fetch(KEPT_ROOTS)] == kept
        assert [tuple(row) for row in await owner.fetch(POSTED_ROOTS)] == posted


async def test_roots_inserted_around_append_records_are_walked(
    database: Database, owner: asyncpg.Connection, store: PostgresStore
) -> None:
    """A bulk load straight into provenance leaves a root without its root sources and
    postings: the query then walks instead of trusting incomplete postings."""
    await owner.execute(
        "INSERT INTO provenance (tenant_id, context_id, kind, source_uri, content_hash, "
        "created_at) VALUES ('default', 'bulk_doc', 'document', 's3://bulk.md', $1, now())",
        "sha256:" + "0" * 64,
    )
    chunk = NewContext(
        context_id="bulk_chunk", parent_ids=["bulk_doc"], kind="chunk",
        content_hash="sha256:" + "1" * 64,
    )  # fmt: skip
    await store.append([chunk])
    await check_against_the_walk(database, owner, "default", "s3://bulk.md", "all", 20)
    answered = await reads.run(
        database, Settings(), "blast_radius_by_source",
        tenant_id="default", source_uri="s3://bulk.md", kind="all", max_depth=20,
    )  # fmt: skip
    assert [row["context_id"] for row in answered] == ["bulk_doc", "bulk_chunk"]


async def test_a_replayed_parent_in_the_batch_hands_down_its_stored_roots(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    """A batch that repeats a stored record (not inserted again) and adds its child: the child's
    root sources come from the stored record's, read after the insert."""
    doc = NewContext(
        context_id="doc", kind="document", source_uri="s3://a.md", content_hash="sha256:" + "0" * 64
    )
    chunk = NewContext(
        context_id="chunk", parent_ids=["doc"], kind="chunk", content_hash="sha256:" + "1" * 64
    )
    summary = NewContext(
        context_id="summary", parent_ids=["chunk"], kind="summary",
        content_hash="sha256:" + "2" * 64,
    )  # fmt: skip
    await store.append([doc, chunk])
    appended = await store.append([chunk, summary])
    assert [a.created for a in appended] == [False, True]
    rows = await owner.fetch(
        f"SELECT context_id, source_uri, depth FROM ({KEPT_ROOTS}) AS kept "
        "ORDER BY depth, context_id"
    )
    assert [tuple(row) for row in rows] == [
        ("doc", "s3://a.md", 0),
        ("chunk", "s3://a.md", 1),
        ("summary", "s3://a.md", 2),
    ]


async def test_a_key_with_more_than_a_thousand_new_records_is_posted_in_rows_of_1000(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    """One append of 2,500 chunks of a document: their postings under the document's source
    are rows of at most 1,000 ids, in id order, every chunk in exactly one."""
    doc = NewContext(
        context_id="big_doc", kind="document", source_uri="s3://big.md",
        content_hash="sha256:" + "0" * 64,
    )  # fmt: skip
    chunks = [
        NewContext(
            context_id=f"chunk_{uuid.uuid4().hex}",
            parent_ids=["big_doc"],
            kind="chunk",
            content_hash=f"sha256:{n:064x}",
        )
        for n in range(2500)
    ]
    await store.append([doc, *chunks])
    rows = await owner.fetch(
        "SELECT context_ids FROM invalidation_postings "
        "WHERE key_no = (SELECT key_no FROM invalidation_keys WHERE key = 'source:s3://big.md') "
        "AND kind = 'chunk' AND depth = 1 "
        "ORDER BY context_ids[1]"
    )
    posted = [list(row["context_ids"]) for row in rows]
    assert [len(ids) for ids in posted] == [1000, 1000, 500]
    assert [i for ids in posted for i in ids] == sorted(c.context_id for c in chunks)


async def test_ids_that_are_uuids_are_posted_as_uuids_and_read_back_as_given(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    """Migration 0048: of one append's 2,500 chunks with UUID ids and 1,200 with other ids, the
    UUIDs are posted as uuid, the others as text, each form in rows of at most 1,000 in id
    order, every id in exactly one; and the blast radius lists every id as it was given."""
    doc = NewContext(
        context_id=str(uuid.uuid4()), kind="document", source_uri="s3://mixed.md",
        content_hash="sha256:" + "0" * 64,
    )  # fmt: skip
    uuids = sorted(str(uuid.uuid4()) for _ in range(2500))
    # Not posted as uuid: a UUID in capitals or without hyphens would print back otherwise.
    others = sorted([f"chunk_{n}" for n in range(1198)] + [uuids[0].upper(), uuid.uuid4().hex])
    chunks = [
        NewContext(
            context_id=context_id,
            parent_ids=[doc.context_id],
            kind="chunk",
            content_hash=f"sha256:{n:064x}",
        )
        for n, context_id in enumerate(uuids + others)
    ]
    await store.append([doc, *chunks])
    rows = await owner.fetch(
        "SELECT context_uuids::text[] AS uuids, context_ids FROM invalidation_postings "
        "WHERE key_no = (SELECT key_no FROM invalidation_keys WHERE key = 'source:s3://mixed.md') "
        "AND kind = 'chunk' AND depth = 1 ORDER BY context_uuids[1]"
    )
    assert [(len(r["uuids"] or []), len(r["context_ids"] or [])) for r in rows] == [
        (1000, 1000), (1000, 200), (500, 0),
    ]  # fmt: skip
    assert [i for r in rows for i in r["uuids"] or []] == uuids
    in_id_order = await owner.fetchval(
        "SELECT array_agg(i ORDER BY i) FROM unnest($1::text[]) AS i", others
    )
    assert [i for r in rows for i in r["context_ids"] or []] == in_id_order
    listed = await reads.run(
        store.database, Settings(), "blast_radius_ids_by_source",
        tenant_id="default", source_uri="s3://mixed.md", kind="chunk", max_depth=20,
    )  # fmt: skip
    assert sorted(row["context_id"] for row in listed) == sorted(uuids + others)
