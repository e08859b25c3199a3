"""The walks' query plans: edge probes down, primary-key probes up, row security checked once
a level, each record read once, no sort for a document's radius."""

import dataclasses
import json
import re
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from lineage import db
from lineage.core.derive import Derivation, derive_many
from lineage.db.named_sql import QUERIES, SQL_DIR
from lineage.services import reads, walks
from lineage.store.postgres import PostgresStore
from tests.walks_helpers import (
    FAN_ANSWERS,
    FAN_TOTAL,
    PARTITION,
    SAMPLE_VALUES,
    explain,
    explain_as_app,
    explain_generic_as_app,
    fan,
    plan_cache_mode,
    plan_nodes,
    seq_scans_of_the_records,
    step_nodes,
    step_scans,
)

# --- plans -------------------------------------------------------------------------------------

ANY_PARENT_IDS = re.compile(r"=\s*ANY\s*\(\s*(?:\w+\.)?parent_ids\b", re.IGNORECASE)


EDGES = f"provenance_children{PARTITION}_tenant_id_parent_key_idx"
IDS = f"provenance{PARTITION}_id"
# A table read by an index (a bitmap's heap scan names the table, its index scan the index).
INDEX_READS = {"Index Scan", "Index Only Scan", "Bitmap Heap Scan"}


async def test_children_are_edge_probes_on_a_tenant_appended_since_the_last_analyze(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    """Statistics from before the tenant's records took its rows for a few dozen: a walk that
    scanned them would take seconds where the probes of the tenant's edges take ms."""
    await owner.execute("ANALYZE provenance, provenance_children")
    await derive_many(store, fan())
    down = await explain(
        owner, "blast_radius",
        tenant_id="default", context_ids=["fan_doc"], kind="any", max_depth=20,
    )  # fmt: skip
    shapes = [(n["Node Type"], n.get("Relation Name"), n.get("Index Name")) for n in down]
    probes = step_scans(down, EDGES)
    assert probes, shapes
    assert all("tenant_id = " in node["Index Cond"] for node in probes), [
        node["Index Cond"] for node in probes
    ]
    assert all("(parent_key = " in node["Index Cond"] for node in probes), [
        node["Index Cond"] for node in probes
    ]
    assert not seq_scans_of_the_records(down), shapes


async def test_invalidation_probes_the_edges_and_never_filters_by_the_whole_frontier(
    store: PostgresStore, owner: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    """Row security checked once a level, not once per probed id; with statistics from before
    the tenant's records, the level is at worst a scan of its edges, never a filter comparing
    each of them with the whole frontier (`= ANY (w.frontier)`: quadratic)."""
    await owner.execute("ANALYZE provenance, provenance_children")
    chunked: dict[str, Any] = {"transform": "chunker", "version": "1", "index_snapshot": "idx_fan"}
    await derive_many(
        store, [dataclasses.replace(i, **chunked) if i.kind == "chunk" else i for i in fan()]
    )
    starts = {
        "transform_version": "chunker@1",
        "index_snapshot": "idx_fan",
        "embedding_model": "embedder-1",
    }
    names = [*walks.IMPACT_QUERIES.values(), *walks.IMPACT_ID_QUERIES.values()]
    invalidations = {name: starts for name in names if name.startswith("invalidate")}
    assert len(invalidations) == 6
    for fresh in (False, True):
        if fresh:
            await owner.execute("VACUUM ANALYZE provenance, provenance_children")
        for name in invalidations:
            wanted = set(QUERIES[name].parameters)
            start = {k: v for k, v in starts.items() if k in wanted}
            plan = await explain_as_app(
                pool, name, tenant_id="default", kind="answer", max_depth=20, **start
            )
            shapes = [(n["Node Type"], n.get("Index Cond"), n.get("Filter")) for n in plan]
            assert not [s for s in shapes if "= ANY (w" in f"{s[1]} {s[2]}"], (name, shapes)
            gated = [n for n in step_nodes(plan, "Node Type", "Result") if "One-Time Filter" in n]
            assert len(gated) <= 1, (name, shapes)
            if fresh:
                edges = step_scans(plan, EDGES)
                assert edges and all("(parent_key = " in n["Index Cond"] for n in edges)


@pytest.mark.parametrize(
    ("name", "values"),
    [
        ("walk_back", {"context_id": "fan_ans_0"}),
        ("blast_radius", {"context_ids": ["fan_summary_0", "fan_summary_1"], "kind": "any"}),
    ],
)
async def test_walks_check_row_security_once_for_the_records_they_read(
    store: PostgresStore,
    owner: asyncpg.Connection,
    pool: asyncpg.Pool,
    name: str,
    values: dict[str, Any],
) -> None:
    """Outside the walk's step (checked once a level), the tenant check gates each scan once:
    a left join to the records re-ran it on every record read (20-30 µs a call as the
    application role: 0.8 of a 1.4 ms walk-back at 250k records)."""
    await derive_many(store, fan())
    await owner.execute("VACUUM ANALYZE provenance, provenance_children")
    plan = await explain_as_app(pool, name, tenant_id="default", max_depth=20, **values)
    [union] = [node for node in plan if node["Node Type"] == "Recursive Union"]
    in_walk = {id(node) for node in plan_nodes(union)}
    # The gate compares the tenant with the function's value, an InitPlan's since migration 0022.
    marks = ("lineage_session_tenant()", "= 'default'::text")
    gates = [
        node["Actual Loops"]
        for node in plan
        if id(node) not in in_walk and any(m in node.get("One-Time Filter", "") for m in marks)
    ]
    assert all(loops == 1 for loops in gates), gates


# A read of the edges, by their table's name with or without its schema.
READS_EDGES = re.compile(r"FROM (public\.)?provenance_children AS")
EDGE_READS = sorted(
    name
    for name, query in QUERIES.items()
    if READS_EDGES.search(query.sql) and not query.sql.startswith("ANALYZE")
)


@pytest.mark.parametrize("name", EDGE_READS)
async def test_every_read_of_the_edges_probes_their_index_under_row_security(
    name: str, store: PostgresStore, owner: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    """An edge is found by md5 of its parent's id as a uuid (migration 0050). That cast is not
    leakproof: written in the probe, row security kept it out of the index condition and each
    probe read every edge of the tenant. So each read makes the keys apart."""
    await derive_many(store, fan())
    await owner.execute("VACUUM ANALYZE provenance, provenance_children")
    values = SAMPLE_VALUES | {"context_ids": ["fan_doc", "fan_chunk_0"], "tree_size": 10}
    # A read planned once per connection, in its function or its transaction, is checked in
    # that generic plan.
    generic = name in reads.GENERIC_PLANS
    if name in reads.ONE_CALL:  # its function plans as its transaction does
        mode = await plan_cache_mode(owner, reads.ONE_CALL[name])
        assert (mode == "force_generic_plan") == generic, (name, mode)
    plan = await (explain_generic_as_app if generic else explain_as_app)(pool, name, **values)
    edges = [n for n in plan if n.get("Relation Name", "").startswith("provenance_children")]
    assert edges and all(n.get("Index Name") == EDGES for n in edges), [
        (n["Node Type"], n.get("Index Name"), n.get("Index Cond"), n.get("Filter")) for n in edges
    ]


async def test_walk_back_reads_each_record_once(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    """The step that reads a level's records for their parents keeps them for the answer: a
    join to the records after the walk read every one of them a second time."""
    await derive_many(store, fan())
    await owner.execute("VACUUM ANALYZE provenance, provenance_children")
    plan = await explain(
        owner, "walk_back", tenant_id="default", context_id="fan_ans_0", max_depth=20
    )
    [union] = [node for node in plan if node["Node Type"] == "Recursive Union"]
    in_walk = {id(node) for node in plan_nodes(union)}
    read_after = [
        node["Relation Name"]
        for node in plan
        if id(node) not in in_walk and node.get("Relation Name", "").startswith("provenance")
    ]
    assert read_after == [], read_after


CHUNKER = {"transform_version": "chunker@1"}
SNAPSHOT = {"index_snapshot": "idx_fan"}


@pytest.mark.parametrize(
    ("name", "values", "read"),
    [
        ("invalidate_ids_by_transform_version", CHUNKER, 0),
        ("invalidate_by_transform_version", CHUNKER, FAN_ANSWERS),
        ("invalidate_ids_by_index_snapshot", SNAPSHOT, 0),
        ("invalidate_by_index_snapshot", SNAPSHOT, FAN_ANSWERS),
        ("blast_radius", {"context_ids": ["fan_doc"]}, FAN_ANSWERS),
    ],
)
async def test_walks_down_read_records_only_for_their_start_and_the_kind_asked_for(
    store: PostgresStore,
    owner: asyncpg.Connection,
    pool: asyncpg.Pool,
    name: str,
    values: dict[str, Any],
    read: int,
) -> None:
    """The walk takes each child's kind from the edge key (migration 0026): the ids queries read
    the records they start from and no other, the records queries the answers asked for and no
    other of the 4,500 records reached (before, each reached record was read for its kind: 1.2
    of 3.25 s of an invalidation at 250k records). Invalidation walks where a record of the
    tenant has no postings (stored before migration 0028): one is stored here."""
    chunked: dict[str, Any] = {"transform": "chunker", "version": "1", "index_snapshot": "idx_fan"}
    await derive_many(
        store, [dataclasses.replace(i, **chunked) if i.kind == "chunk" else i for i in fan()]
    )
    await store_without_postings(owner)
    await owner.execute("VACUUM ANALYZE provenance, provenance_children")
    plan = await explain_as_app(
        pool, name, tenant_id="default", kind="answer", max_depth=20, **values
    )
    [union] = [node for node in plan if node["Node Type"] == "Recursive Union"]
    in_walk = list(plan_nodes(union))
    records = f"provenance{PARTITION}"
    assert not [n for n in in_walk if n.get("Relation Name") == records][1:], name
    read_after = [
        node["Actual Loops"] * node["Actual Rows"]
        for node in plan
        if node.get("Relation Name") == records
        and node["Node Type"] != "Index Only Scan"  # whether a record lacks postings
        and all(node is not n for n in in_walk)
    ]
    assert sum(read_after) == read, read_after


async def store_without_postings(owner: asyncpg.Connection) -> None:
    """A record as the append stored it before migration 0028, with no postings."""
    await owner.execute(
        "INSERT INTO provenance (tenant_id, context_id, kind, source_uri, content_hash, "
        "created_at) VALUES ('default', 'stored_before_postings', 'document', 's3://old.md', "
        "'sha256:00', now())"
    )


@pytest.mark.parametrize(
    ("name", "values"),
    [
        ("invalidate_ids_by_transform_version", CHUNKER),
        ("invalidate_by_transform_version", CHUNKER),
        ("invalidate_ids_by_index_snapshot", SNAPSHOT),
        ("invalidate_by_index_snapshot", SNAPSHOT),
    ],
)
async def test_invalidation_is_one_read_of_the_postings_index(
    store: PostgresStore,
    owner: asyncpg.Connection,
    pool: asyncpg.Pool,
    name: str,
    values: dict[str, Any],
) -> None:
    """Every record with its postings (migration 0028): as the application role, under row
    security, the postings of the key and the kind asked for are read by their b-tree (migration
    0034; the GIN probe of 0033 never was an index condition there, `@>` not being leakproof,
    so the tenant's records were scanned), no record is scanned, the records of the kind asked
    for are read once by id (by the ids variants not at all), and no edge is probed."""
    chunked: dict[str, Any] = {"transform": "chunker", "version": "1", "index_snapshot": "idx_fan"}
    await derive_many(
        store, [dataclasses.replace(i, **chunked) if i.kind == "chunk" else i for i in fan()]
    )
    await other_postings(owner, "index_snapshot:")
    await owner.execute("VACUUM ANALYZE provenance, provenance_children, invalidation_postings")
    plan = await explain_as_app(
        pool, name, tenant_id="default", kind="answer", max_depth=20, **values
    )
    edge_probes = [n["Actual Loops"] for n in plan if n.get("Index Name") == EDGES]
    assert edge_probes and set(edge_probes) == {0}, "the walk down the edges ran"
    postings = [n for n in plan if n.get("Relation Name") == f"invalidation_postings{PARTITION}"]
    assert postings and all(n["Node Type"] in INDEX_READS for n in postings), [
        n["Node Type"] for n in postings
    ]
    records = f"provenance{PARTITION}"
    scans = [
        n
        for n in plan
        if n.get("Relation Name") == records and n["Node Type"] == "Seq Scan" and n["Actual Loops"]
    ]
    assert scans == [], [n.get("Filter") for n in scans]  # the walk's start, unrun, aside
    reads = [  # rows are a loop's, on average
        n["Actual Rows"] * n["Actual Loops"]
        for n in plan
        if n.get("Relation Name") == records and n["Actual Rows"]
    ]
    assert reads == ([] if "_ids_" in name else [FAN_ANSWERS]), reads  # each answer once
    # The answer's ids are sorted before its records are read: a sort of the records spilled
    # 55 MB to disk for 212,500 answers. (An id's row is about 100 bytes wide with its sort key
    # in code point order beside it; a record's, several hundred.)
    sorted_widths = [n["Plan Width"] for n in plan if n["Node Type"] == "Sort"]
    assert all(width < 150 for width in sorted_widths), sorted_widths


async def other_postings(owner: asyncpg.Connection, prefix: str) -> None:
    """Postings of 20,000 other keys: a table of some pages, where a scan costs more."""
    async with owner.transaction():
        await owner.execute("SET LOCAL lineage.tenant_id = 'default'")
        await owner.execute(
            "INSERT INTO invalidation_keys (tenant_id, key_no, key) "
            "SELECT 'default', 100000 + n, $1 || 'other_' || n FROM generate_series(1, 20000) AS n",
            prefix,
        )
        await owner.execute(
            "INSERT INTO invalidation_postings (tenant_id, key_no, kind, depth, created_at, "
            "context_ids) SELECT 'default', 100000 + n, 'answer', 1, now(), "
            "ARRAY['fan_ans_0'] FROM generate_series(1, 20000) AS n"
        )


@pytest.mark.parametrize("name", ["blast_radius_ids_by_source", "blast_radius_by_source"])
async def test_a_document_radius_is_one_range_of_the_postings_by_source(
    store: PostgresStore, owner: asyncpg.Connection, pool: asyncpg.Pool, name: str
) -> None:
    """The postings list a source's records of a kind by depth (migration 0036): the answers
    are one index range under the source's key, sorted as ids (never as records), with
    `truncated` one probe past them; no root_sources row per record and source is read."""
    await derive_many(store, fan())
    await other_postings(owner, "source:")
    await owner.execute("VACUUM ANALYZE provenance, invalidation_postings")
    values = {"tenant_id": "default", "source_uri": "s3://big.md", "kind": "answer"}
    plan = await explain_as_app(pool, name, max_depth=20, **values)
    postings = [n for n in plan if n.get("Relation Name") == "invalidation_postings_p_open"]
    assert postings and all("Index" in n["Node Type"] for n in postings), postings
    assert all("(key_no = " in n["Index Cond"] for n in postings), postings
    assert sum(n["Actual Rows"] for n in postings) < FAN_ANSWERS  # rows of ids, not an id a row
    assert not seq_scans_of_the_records(plan)
    sorts = [n for n in plan if n["Node Type"] in {"Sort", "Incremental Sort"}]
    keys = [" ".join(n["Sort Key"]) for n in sorts if n["Actual Rows"]]
    assert all("posting.context_id" in key and 'COLLATE "C"' in key for key in keys), keys
    async with db.transaction(pool, "default") as connection:
        listed = await db.fetch(connection, name, max_depth=20, **values)
        shallow = await db.fetch(connection, name, **{**values, "kind": "all", "max_depth": 2})
    assert len(listed) == FAN_ANSWERS and not any(r["truncated"] for r in listed)
    order = [(r["depth"], r["context_id"]) for r in shallow]
    assert order == sorted(order) and len(order) == FAN_TOTAL - FAN_ANSWERS
    assert all(r["truncated"] for r in shallow)  # the answers lie at depth 3


async def test_the_ids_below_a_record_read_no_record_but_the_start(
    store: PostgresStore, owner: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    """The ids file and listing of a walk down by id (blast_radius_ids) take each kind from the
    edges: only the start is read from the records, where the records' walk reads every one
    it lists."""
    assert walks.IMPACT_ID_QUERIES["context_ids"] == "blast_radius_ids"
    await derive_many(store, fan())
    await owner.execute("VACUUM ANALYZE provenance, provenance_children")
    values = {"tenant_id": "default", "context_ids": ["fan_doc"], "kind": "answer"}
    read = {}
    for name in ("blast_radius_ids", "blast_radius"):
        plan = await explain_as_app(pool, name, max_depth=20, **values)
        records = [n for n in plan if n.get("Relation Name", "").startswith("provenance_p")]
        read[name] = sum(n["Actual Rows"] * n["Actual Loops"] for n in records)
    assert read == {"blast_radius_ids": 1, "blast_radius": 1 + FAN_ANSWERS}


async def test_plans_use_the_tenant_edges_down_and_the_primary_key_up(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    await derive_many(store, fan())
    await owner.execute("VACUUM ANALYZE provenance, provenance_children")
    down = await explain(
        owner, "blast_radius",
        tenant_id="default", context_ids=["fan_doc"], kind="any", max_depth=20,
    )  # fmt: skip
    probes = step_scans(down, EDGES)
    assert probes, [(n["Node Type"], n.get("Index Name"), n.get("Filter")) for n in down]
    # The edge index is (tenant_id, parent_key): a probe reads the tenant's edges only.
    assert all(node["Node Type"] == "Index Scan" for node in probes), probes
    assert all(
        "tenant_id = " in node["Index Cond"] and "(parent_key = " in node["Index Cond"]
        for node in probes
    ), [node["Index Cond"] for node in probes]

    up = await explain(
        owner, "walk_back", tenant_id="default", context_id="fan_ans_0", max_depth=20
    )
    pkey = step_scans(up, IDS)
    assert pkey, [(n["Node Type"], n.get("Index Name"), n.get("Filter")) for n in up]
    assert all("context_id = ANY" in node["Index Cond"] for node in pkey)


async def test_each_walk_level_is_computed_once(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    await derive_many(store, fan())
    await owner.execute("VACUUM ANALYZE provenance, provenance_children")
    down = await explain(
        owner, "blast_radius",
        tenant_id="default", context_ids=["fan_doc"], kind="any", max_depth=20,
    )  # fmt: skip
    up = await explain(
        owner, "walk_back", tenant_id="default", context_id="fan_ans_0", max_depth=20
    )
    # step.ids is read twice per level (frontier, seen || ids); the planner inlines the LATERAL
    # subquery, so unless it is fenced (OFFSET 0) the ARRAY(...) step runs twice per level.
    searches = {
        "descendants": len(step_scans(down, EDGES)),
        "ancestors": len(step_scans(up, IDS)),
    }
    assert searches == {"descendants": 1, "ancestors": 1}, (
        "BUG lineage/sql: every level of the walk is searched twice (two identical SubPlans); "
        "add OFFSET 0 to the CROSS JOIN LATERAL (SELECT ARRAY(...)) step"
    )


def test_no_descendant_walk_scans_parent_ids_with_any() -> None:
    # `x = ANY(parent_ids)` reads every record of the tenant; the edges are probed instead.
    texts = {path.name: path.read_text() for path in sorted(SQL_DIR.glob("*.sql"))}
    offenders = {name for name, text in texts.items() if ANY_PARENT_IDS.search(text)}
    assert offenders == set()
    assert ANY_PARENT_IDS.search("WHERE 'x' = ANY (c.parent_ids)")  # the pattern does match
    downward = {name for name, text in texts.items() if READS_EDGES.search(text)}
    assert downward >= {
        "blast_radius.sql", "blast_radius_by_source.sql", "blast_radius_ids_by_source.sql",
        "invalidate_by_transform_version.sql", "invalidate_by_index_snapshot.sql",
        "stale_sources.sql", "claim_verdicts.sql", "suspicious_hops.sql", "statement_verdicts.sql",
        "verdict_history.sql",
    }  # fmt: skip


async def test_a_page_since_a_time_starts_its_index_range_there(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    """since and the cursor are one lower bound: with two, the range began at the cursor's (the
    first page's, the start of time) and read every earlier record of the tenant."""
    await derive_many(
        store,
        [Derivation([], f"old {n}", "document", source_uri=f"s3://old/{n}") for n in range(3000)],
    )
    [late] = await derive_many(store, [Derivation([], "late", "document", source_uri="s3://late")])
    since = await owner.fetchval(
        "SELECT created_at FROM provenance WHERE context_id = $1", late.context_id
    )
    query = QUERIES["list_contexts"]
    values: dict[str, object] = dict.fromkeys(
        ("kind", "source_uri", "trace_id", "produced_by"), "any"
    )
    values |= {"tenant_id": "default", "session_id": "any", "page_size": 100}
    values |= {"since": since, "until": datetime.max.replace(tzinfo=UTC)}
    values |= {"after_created_at": datetime.min.replace(tzinfo=UTC), "after_context_id": ""}
    rows = await owner.fetch(query.sql, *query.arguments(values))
    assert [row["context_id"] for row in rows] == [late.context_id]
    text = await owner.fetchval(
        f"EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) {query.sql}",
        *query.arguments(values),
    )
    [scan] = [n for n in plan_nodes(json.loads(text)[0]["Plan"]) if n["Node Type"] in INDEX_READS]
    blocks = scan["Shared Hit Blocks"] + scan["Shared Read Blocks"]
    assert blocks <= 6, scan
