"""The graph walks against a real PostgreSQL: minimal depths on DAGs, big blast radii and their
NDJSON stream, truncation, timeouts, plans, the named-query files, tenant confinement, bad
parameters, and the API, CLI and SQL files agreeing on the demo incident."""

import ast
import asyncio
import dataclasses
import json
import re
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from typer.testing import CliRunner

import lineage
from lineage import cli, db
from lineage.api.app import create_app
from lineage.core.derive import Context, Derivation, derive, derive_many
from lineage.core.errors import NotFound, WalkTimeout
from lineage.db.database import Database
from lineage.db.named_sql import QUERIES, SQL_DIR, load, parse
from lineage.services import reads, walks
from lineage.services.demo import (
    ANSWER_ID,
    CONTRACTOR_POLICY,
    EMPLOYEE_POLICY,
    INCIDENT,
    TRACE_ID,
    load_incident,
)
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore

Node = dict[str, Any]
NDJSON = "application/x-ndjson"


# --- helpers -----------------------------------------------------------------------------------


async def run_sql(pool: asyncpg.Pool, name: str, **values: Any) -> list[Node]:
    """A named query exactly as its file says, bypassing walks.py."""
    query = QUERIES[name]
    async with db.transaction(pool, values["tenant_id"]) as connection:
        rows = await connection.fetch(query.sql, *query.arguments(values))
    return [dict(row) for row in rows]


def depths(nodes: list[Node]) -> dict[str, int]:
    ids = [node["context_id"] for node in nodes]
    assert len(ids) == len(set(ids)), f"a node came back twice: {Counter(ids).most_common(3)}"
    return {node["context_id"]: node["depth"] for node in nodes}


def assert_problem(response: httpx.Response, status: int, *fragments: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    for fragment in fragments:
        assert fragment in body["detail"], body
    return body


def ndjson_lines(text: str) -> tuple[list[Node], dict[str, Any]]:
    """Records, then the closing summary line."""
    lines = [json.loads(line) for line in text.splitlines() if line]
    assert lines, "an NDJSON answer always ends with a summary line"
    *records, last = lines
    assert set(last) == {"summary"}, last
    summary: dict[str, Any] = last["summary"]
    return records, summary


@asynccontextmanager
async def serve(settings: Settings, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """Like the `client` fixture, with settings of the test's choosing."""
    app = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as http:
            yield http


async def run_cli(database_url: str, *args: str) -> str:
    # The CLI calls asyncio.run, which cannot nest in this test's running loop: use a thread.
    runner = CliRunner()
    result = await asyncio.to_thread(
        runner.invoke,
        cli.app,
        list(args),
        env={"LINEAGE_DATABASE_URL": database_url, "COLUMNS": "200"},
    )
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


async def explain(owner: asyncpg.Connection, name: str, **values: Any) -> list[dict[str, Any]]:
    """Every node of the query's plan. ANALYZE because a WorkTable Scan sets up its projection,
    and so the step's SubPlan, only when it runs: plain EXPLAIN leaves the step out."""
    async with owner.transaction():
        return await _explained(owner, name, values)


async def explain_as_app(pool: asyncpg.Pool, name: str, **values: Any) -> list[dict[str, Any]]:
    """The same as the application role, row security on."""
    async with db.transaction(pool, values["tenant_id"]) as connection:
        return await _explained(connection, name, values)


async def _explained(
    connection: asyncpg.Connection, name: str, values: dict[str, Any]
) -> list[dict[str, Any]]:
    query = QUERIES[name]
    await connection.execute("SET LOCAL jit = off")
    text = await connection.fetchval(
        f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) {query.sql}", *query.arguments(values)
    )
    document = json.loads(text) if isinstance(text, str) else text
    return list(plan_nodes(document[0]["Plan"]))


def step_nodes(plan: list[dict[str, Any]], key: str, name: str) -> list[dict[str, Any]]:
    """The nodes of the walk's recursive term (the Recursive Union's inner side) whose `key`
    is `name`: "Index Name" for index scans, "Function Name" for function scans."""
    [union] = [node for node in plan if node["Node Type"] == "Recursive Union"]
    [step] = [node for node in union["Plans"] if node["Parent Relationship"] == "Inner"]
    return [node for node in plan_nodes(step) if node.get(key) == name]


def step_scans(plan: list[dict[str, Any]], index: str) -> list[dict[str, Any]]:
    return step_nodes(plan, "Index Name", index)


# --- graphs ------------------------------------------------------------------------------------

LAYERS = 20


def ladder() -> list[Derivation]:
    """20 layers of 2; each node has both nodes of the layer above as parents: 2^19 paths."""
    items = [
        Derivation([], "ladder root", "document", source_uri="s3://ladder.md", context_id="rung_0")
    ]
    above = ["rung_0"]
    for layer in range(1, LAYERS + 1):
        names = [f"rung_{layer}_{side}" for side in "ab"]
        items += [
            Derivation(above, f"layer {layer} {name}", "summary", context_id=name) for name in names
        ]
        above = names
    return items


FAN_CHUNKS = 3000
FAN_SUMMARIES = 1000
FAN_ANSWERS = 500


def fan() -> list[Derivation]:
    """One document, 3000 chunks, 1000 summaries of 2 or 3 chunks, 500 answers of 2 summaries."""
    items = [Derivation([], "big doc", "document", source_uri="s3://big.md", context_id="fan_doc")]
    chunks = [f"fan_chunk_{i}" for i in range(FAN_CHUNKS)]
    items += [Derivation(["fan_doc"], f"chunk {c}", "chunk", context_id=c) for c in chunks]
    summaries = [f"fan_summary_{i}" for i in range(FAN_SUMMARIES)]
    items += [
        Derivation(chunks[3 * i : 3 * i + 2 + i % 2], f"summary {s}", "summary", context_id=s)
        for i, s in enumerate(summaries)
    ]
    items += [
        Derivation(summaries[2 * j : 2 * j + 2], f"answer {j}", "answer", context_id=f"fan_ans_{j}")
        for j in range(FAN_ANSWERS)
    ]
    return items


FAN_COUNTS = {"answer": FAN_ANSWERS, "chunk": FAN_CHUNKS, "document": 1, "summary": FAN_SUMMARIES}
FAN_TOTAL = sum(FAN_COUNTS.values())


def chain(length: int = 5) -> list[Derivation]:
    """chain_0 (a document) <- chain_1 <- ... <- chain_5."""
    items = [Derivation([], "chain", "document", source_uri="s3://chain.md", context_id="chain_0")]
    items += [
        Derivation([f"chain_{i - 1}"], f"link {i}", "summary", context_id=f"chain_{i}")
        for i in range(1, length + 1)
    ]
    return items


WIDE = 20_000


async def load_wide(owner: asyncpg.Connection) -> None:
    """wide_doc <- 20k chunks <- 20 summaries of 1000 chunks each <- wide_sink, in bulk."""
    await owner.execute(
        f"""
        INSERT INTO provenance (tenant_id, context_id, parent_ids, kind, source_uri,
                                content_hash, created_at)
        VALUES ('default', 'wide_doc', '{{}}', 'document', 's3://wide.md',
                'sha256:' || repeat('0', 64), now());
        INSERT INTO provenance (tenant_id, context_id, parent_ids, kind, content_hash, created_at)
        SELECT 'default', 'wide_' || i, ARRAY['wide_doc'], 'chunk',
               'sha256:' || md5(i::text) || md5(i::text), now()
        FROM generate_series(1, {WIDE}) AS i;
        INSERT INTO provenance (tenant_id, context_id, parent_ids, kind, content_hash, created_at)
        SELECT 'default', 'wide_mid_' || (i - 1) / 1000, array_agg('wide_' || i ORDER BY i),
               'summary', 'sha256:' || md5('mid' || (i - 1) / 1000) || repeat('2', 32), now()
        FROM generate_series(1, {WIDE}) AS i
        GROUP BY (i - 1) / 1000;
        INSERT INTO provenance (tenant_id, context_id, parent_ids, kind, content_hash, created_at)
        SELECT 'default', 'wide_sink', array_agg('wide_mid_' || m ORDER BY m), 'answer',
               'sha256:' || repeat('1', 64), now()
        FROM generate_series(0, {WIDE // 1000 - 1}) AS m;
        INSERT INTO provenance_children (tenant_id, parent_id, context_id, created_at, kind)
        SELECT tenant_id, unnest(parent_ids), context_id, created_at, kind FROM provenance;
        """
    )


# --- 1. minimal depths on DAGs -----------------------------------------------------------------


async def test_ladder_walks_visit_each_node_once_at_its_minimal_depth(
    store: PostgresStore, database: Database, settings: Settings
) -> None:
    await derive_many(store, ladder())
    walk = await walks.walk_back(database, settings, "default", f"rung_{LAYERS}_a", 100)
    expected = {f"rung_{LAYERS}_a": 0, "rung_0": LAYERS}
    expected |= {f"rung_{layer}_{s}": LAYERS - layer for layer in range(1, LAYERS) for s in "ab"}
    assert depths(walk.nodes) == expected
    assert walk.truncated is False
    # Each reached edge once: 2 parents for each of the 37 nodes above layer 1, 1 for layer 1's.
    edges = walk.edges()
    assert len(edges) == len({(e["child"], e["parent"]) for e in edges}) == 2 * 37 + 2

    radius = await reads.run(
        database, settings, "blast_radius",
        tenant_id="default", context_ids=["rung_0"], kind="all", max_depth=100,
    )  # fmt: skip
    expected_down = {"rung_0": 0} | {
        f"rung_{layer}_{s}": layer for layer in range(1, LAYERS + 1) for s in "ab"
    }
    assert depths(radius) == expected_down
    assert not any(node["truncated"] for node in radius)


async def test_node_reachable_at_two_depths_appears_once_at_the_smaller(
    store: PostgresStore, database: Database, settings: Settings
) -> None:
    # root <- a <- b <- c, and c also names root directly: c sees root at depths 1 and 3.
    await derive_many(
        store,
        [
            Derivation([], "root", "document", source_uri="s3://two.md", context_id="two_root"),
            Derivation(["two_root"], "a", "chunk", context_id="two_a"),
            Derivation(["two_a"], "b", "summary", context_id="two_b"),
            Derivation(["two_b", "two_root"], "c", "answer", context_id="two_c"),
        ],
    )
    walk = await walks.walk_back(database, settings, "default", "two_c", 100)
    assert depths(walk.nodes) == {"two_c": 0, "two_b": 1, "two_root": 1, "two_a": 2}
    radius = await reads.run(
        database, settings, "blast_radius",
        tenant_id="default", context_ids=["two_root"], kind="all", max_depth=100,
    )  # fmt: skip
    assert depths(radius) == {"two_root": 0, "two_a": 1, "two_c": 1, "two_b": 2}


# --- 2. a document with thousands of descendants -----------------------------------------------


async def test_big_blast_radius_counts_and_ndjson_stream(
    store: PostgresStore, database: Database, settings: Settings, client: httpx.AsyncClient
) -> None:
    await derive_many(store, fan())
    nodes = await reads.run(
        database, settings, "blast_radius",
        tenant_id="default", context_ids=["fan_doc"], kind="any", max_depth=20,
    )  # fmt: skip
    assert len(depths(nodes)) == FAN_TOTAL
    assert Counter(node["kind"] for node in nodes) == FAN_COUNTS
    level = {"document": 0, "chunk": 1, "summary": 2, "answer": 3}
    assert all(node["depth"] == level[node["kind"]] for node in nodes)

    response = await client.get("/v1/contexts/fan_doc/impact", headers={"Accept": NDJSON})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(NDJSON)
    records, summary = ndjson_lines(response.text)
    assert len(records) == FAN_TOTAL
    assert {r["context_id"] for r in records} == {n["context_id"] for n in nodes}
    assert summary == {
        "total": FAN_TOTAL, "counts_by_kind": FAN_COUNTS, "truncated": False,
        "truncated_reason": None,
    }  # fmt: skip
    assert Counter(r["kind"] for r in records) == summary["counts_by_kind"]


async def test_big_blast_radius_as_json_is_refused_past_the_stream_threshold(
    store: PostgresStore, settings: Settings, client: httpx.AsyncClient
) -> None:
    await derive_many(store, fan())
    assert settings.stream_threshold == FAN_SUMMARIES  # the boundary the next asserts rely on
    refused = await client.get("/v1/contexts/fan_doc/impact")
    assert_problem(refused, 422, f"more than {settings.stream_threshold} records", NDJSON)
    by_source = await client.get("/v1/impact", params={"source_uri": "s3://big.md"})
    assert_problem(by_source, 422, NDJSON)
    # Exactly the threshold still comes as JSON.
    at_limit = await client.get("/v1/contexts/fan_doc/impact", params={"kind": "summary"})
    assert at_limit.status_code == 200, at_limit.text
    body = at_limit.json()
    assert len(body["nodes"]) == FAN_SUMMARIES
    assert body["summary"]["counts_by_kind"] == {"summary": FAN_SUMMARIES}


# Connections of the database under test left inside a transaction.
OPEN_TRANSACTIONS = """
SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND state LIKE 'idle in transaction%'
"""


async def test_refused_json_impacts_do_not_strand_pooled_connections(
    store: PostgresStore, owner: asyncpg.Connection, database_url: str
) -> None:
    await load_incident(store)
    # A refusal leaves the walk's cursor half read; more refusals than the pool holds (10).
    async with serve(Settings(stream_threshold=3, auth="none"), database_url) as http:
        for _ in range(12):
            response = await http.get("/v1/impact", params={"source_uri": CONTRACTOR_POLICY})
            assert_problem(response, 422, "more than 3 records", NDJSON)
            # The walk's transaction ended with the refusal, not when the collector came.
            assert await owner.fetchval(OPEN_TRANSACTIONS) == 0
        streamed = await http.get(
            "/v1/impact", params={"source_uri": CONTRACTOR_POLICY}, headers={"Accept": NDJSON}
        )
        records, summary = ndjson_lines(streamed.text)
        assert summary["total"] == len(records) == 8


# --- 3. truncation -----------------------------------------------------------------------------


async def test_max_depth_truncates_walks(
    store: PostgresStore,
    pool: asyncpg.Pool,
    database: Database,
    settings: Settings,
    client: httpx.AsyncClient,
) -> None:
    await derive_many(store, chain())

    async def back(context_id: str, max_depth: int) -> list[Node]:
        return await run_sql(
            pool, "walk_back", tenant_id="default", context_id=context_id, max_depth=max_depth
        )

    cut = await back("chain_5", 2)
    assert depths(cut) == {"chain_5": 0, "chain_4": 1, "chain_3": 2}
    assert all(row["truncated"] for row in cut)
    exact = await back("chain_5", 5)  # the root sits exactly at max_depth: nothing lies beyond
    assert len(exact) == 6
    assert not any(row["truncated"] for row in exact)
    assert all(row["truncated"] for row in await back("chain_5", 4))
    only_start = await back("chain_5", 0)
    assert depths(only_start) == {"chain_5": 0}
    assert only_start[0]["truncated"] is True
    root_only = await back("chain_0", 0)
    assert depths(root_only) == {"chain_0": 0}
    assert root_only[0]["truncated"] is False

    assert (await walks.walk_back(database, settings, "default", "chain_5", 2)).truncated is True
    assert (await walks.walk_back(database, settings, "default", "chain_5", 5)).truncated is False
    start = await walks.walk_back(database, settings, "default", "chain_5", 0)
    assert [n["context_id"] for n in start.nodes] == ["chain_5"]
    assert start.edges() == []

    short = (await client.get("/v1/contexts/chain_5/lineage", params={"max_depth": 2})).json()
    assert short["truncated"] is True
    assert depths(short["nodes"]) == {"chain_5": 0, "chain_4": 1, "chain_3": 2}
    assert short["edges"] == [
        {"child": "chain_5", "parent": "chain_4"},
        {"child": "chain_4", "parent": "chain_3"},
    ]
    full = (await client.get("/v1/contexts/chain_5/lineage")).json()
    assert full["truncated"] is False
    assert len(full["nodes"]) == 6
    zero = (await client.get("/v1/contexts/chain_5/lineage", params={"max_depth": 0})).json()
    assert zero["truncated"] is True
    assert [n["context_id"] for n in zero["nodes"]] == ["chain_5"]

    down = await run_sql(
        pool, "blast_radius", tenant_id="default", context_ids=["chain_0"], kind="all", max_depth=3
    )
    assert len(down) == 4
    assert all(row["truncated"] for row in down)
    impact = await client.get("/v1/contexts/chain_0/impact", params={"max_depth": 3})
    assert impact.json()["summary"]["truncated"] is True
    assert impact.json()["summary"]["truncated_reason"] == "max_depth"
    impact = await client.get("/v1/contexts/chain_0/impact", params={"max_depth": 5})
    assert impact.json()["summary"] == {
        "total": 6,
        "counts_by_kind": {"document": 1, "summary": 5},
        "truncated": False,
        "truncated_reason": None,
    }


# --- 4. timeouts -------------------------------------------------------------------------------


async def test_walks_past_the_statement_timeout_raise_and_answer_503(
    owner: asyncpg.Connection, database: Database, settings: Settings, database_url: str
) -> None:
    await load_wide(owner)
    assert await owner.fetchval("SELECT count(*) FROM provenance") == WIDE + WIDE // 1000 + 2
    # The same walks, cut short, answer under the normal timeout: the start ids are right.
    start = await reads.run(
        database, settings, "blast_radius",
        tenant_id="default", context_ids=["wide_doc"], kind="all", max_depth=0,
    )  # fmt: skip
    assert [(n["context_id"], n["truncated"]) for n in start] == [("wide_doc", True)]
    up = await walks.walk_back(database, settings, "default", "wide_sink", 1)
    assert len(up.nodes) == 1 + WIDE // 1000
    assert up.truncated is True

    # 20 ms cuts these walks (140-500 ms) but not the preparing of their statements: a timeout
    # that fires while asyncpg prepares one closes the connection (an outage 503, not this one).
    hurried = Settings(statement_timeout_ms=20, auth="none")
    with pytest.raises(WalkTimeout, match="20 ms statement timeout"):
        await reads.run(
            database, hurried, "blast_radius",
            tenant_id="default", context_ids=["wide_doc"], kind="all", max_depth=20,
        )  # fmt: skip
    with pytest.raises(WalkTimeout, match="walk_back ran past the 20 ms statement timeout"):
        await walks.walk_back(database, hurried, "default", "wide_sink", 20)
    # The pool is still usable after the cancelled transactions.
    assert (
        await reads.run(database, settings, "trace_contexts", tenant_id="default", trace_id="x")
        == []
    )

    async with serve(hurried, database_url) as http:
        for path, params in (
            ("/v1/contexts/wide_sink/lineage", {}),
            ("/v1/contexts/wide_doc/impact", {"kind": "all"}),
            ("/v1/impact", {"source_uri": "s3://wide.md"}),
        ):
            response = await http.get(path, params=params)
            body = assert_problem(response, 503, "statement timeout")
            assert body["title"] == "WalkTimeout"
        # A stream starts its walk before it sends 200: a walk that fails at once is a 503 too.
        streamed = await http.get(
            "/v1/impact", params={"source_uri": "s3://wide.md"}, headers={"Accept": NDJSON}
        )
        assert assert_problem(streamed, 503, "statement timeout")["title"] == "WalkTimeout"
        # So is the ids file, which the server copies out (COPY) from its own task.
        copied = await http.get("/v1/impact/ids", params={"context_id": "wide_doc"})
        assert assert_problem(copied, 503, "statement timeout")["title"] == "WalkTimeout"
    whole = [
        chunk
        async for chunk in reads.copy_id_file(
            database, settings, "blast_radius",
            tenant_id="default", context_ids=["wide_doc"], kind="all", max_depth=20,
        )
    ]  # fmt: skip
    assert b"".join(whole).count(b"\r\n") == WIDE + WIDE // 1000 + 2
    # A caller that stops reading midway leaves the pool usable: the COPY is cancelled.
    copying = reads.copy_id_file(
        database, settings, "blast_radius",
        tenant_id="default", context_ids=["wide_doc"], kind="all", max_depth=20,
    )  # fmt: skip
    await anext(copying)
    await copying.aclose()
    assert (
        await reads.run(database, settings, "trace_contexts", tenant_id="default", trace_id="x")
        == []
    )


# --- 5. plans ----------------------------------------------------------------------------------

ANY_PARENT_IDS = re.compile(r"=\s*ANY\s*\(\s*(?:\w+\.)?parent_ids\b", re.IGNORECASE)


# With no retention period each partitioned table has one partition (migration 0018).
PARTITION = "_p_open"
EDGES = f"provenance_children{PARTITION}_pkey"
IDS = f"provenance{PARTITION}_id"


def seq_scans_of_the_records(plan: list[dict[str, Any]]) -> list[str]:
    """Sequential scans of the partition that holds the records."""
    return [
        node["Relation Name"]
        for node in plan
        if node["Node Type"] == "Seq Scan" and node["Relation Name"].endswith(PARTITION)
    ]


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
    assert all("parent_id = parent.id" in node["Index Cond"] for node in probes), [
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
    starts = {"transform_version": "chunker@1", "index_snapshot": "idx_fan"}
    names = [*walks.IMPACT_QUERIES.values(), *walks.IMPACT_ID_QUERIES.values()]
    invalidations = {name: starts for name in names if name.startswith("invalidate")}
    assert len(invalidations) == 4
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
                assert edges and all("parent_id = parent.id" in n["Index Cond"] for n in edges)


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
    of 3.25 s of an invalidation at 250k records)."""
    chunked: dict[str, Any] = {"transform": "chunker", "version": "1", "index_snapshot": "idx_fan"}
    await derive_many(
        store, [dataclasses.replace(i, **chunked) if i.kind == "chunk" else i for i in fan()]
    )
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
        if node.get("Relation Name") == records and all(node is not n for n in in_walk)
    ]
    assert sum(read_after) == read, read_after


@pytest.mark.parametrize("name", ["blast_radius_ids_by_source", "blast_radius_by_source"])
async def test_a_document_radius_is_listed_in_key_order_without_a_sort(
    store: PostgresStore, owner: asyncpg.Connection, pool: asyncpg.Pool, name: str
) -> None:
    """root_sources' key holds a kind's rows nearest first (migration 0027): the answers come
    from the index in the order listed, `truncated` is one probe past them; before, every row
    was held for a window and sorted (180 of 354 ms for a document's 205k answers at 10M)."""
    await derive_many(store, fan())
    await owner.execute("VACUUM ANALYZE provenance, root_sources")
    values = {"tenant_id": "default", "source_uri": "s3://big.md", "kind": "answer"}
    plan = await explain_as_app(pool, name, max_depth=20, **values)
    held = [n for n in plan if n["Node Type"] in {"Sort", "Incremental Sort", "WindowAgg"}]
    assert sum(node["Actual Rows"] for node in held) == 0, held  # the walk's sort stays empty
    async with db.transaction(pool, "default") as connection:
        listed = await db.fetch(connection, name, max_depth=20, **values)
        shallow = await db.fetch(connection, name, **{**values, "kind": "all", "max_depth": 2})
    assert len(listed) == FAN_ANSWERS and not any(r["truncated"] for r in listed)
    order = [(r["depth"], r["context_id"]) for r in shallow]
    assert order == sorted(order) and len(order) == FAN_TOTAL - FAN_ANSWERS
    assert all(r["truncated"] for r in shallow)  # the answers lie at depth 3


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
    # The edge index leads with tenant_id: a probe reads the tenant's edges only.
    assert all(node["Node Type"] == "Index Only Scan" for node in probes), probes

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


async def test_appends_leave_no_gin_pending_list_for_walks_to_rescan(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    # Autovacuum would flush the list at some moment; off, the state after the append is fixed.
    await owner.execute(f"ALTER TABLE provenance{PARTITION} SET (autovacuum_enabled = off)")
    await derive_many(store, fan())
    pending_pages = await owner.fetchval(
        "SELECT gin_clean_pending_list(i.indexrelid::regclass) FROM pg_index AS i "
        "JOIN pg_inherits AS h ON h.inhrelid = i.indexrelid "
        "WHERE h.inhparent = 'provenance_parent_ids'::regclass "
        "AND i.indrelid = $1::regclass",
        f"provenance{PARTITION}",
    )
    assert pending_pages == 0, (
        f"BUG migrations/versions/0001_provenance.py: provenance_parent_ids keeps appends in a "
        f"GIN pending list ({pending_pages} pages after {FAN_TOTAL} records) that every probe "
        "of a descendant walk rescans (a 20k-chunk document: 15 s, so 503); create the index "
        "WITH (fastupdate = off)"
    )


def test_no_descendant_walk_scans_parent_ids_with_any() -> None:
    # `x = ANY(parent_ids)` reads every record of the tenant; the edges are probed instead.
    texts = {path.name: path.read_text() for path in sorted(SQL_DIR.glob("*.sql"))}
    offenders = {name for name, text in texts.items() if ANY_PARENT_IDS.search(text)}
    assert offenders == set()
    assert ANY_PARENT_IDS.search("WHERE 'x' = ANY (c.parent_ids)")  # the pattern does match
    downward = {name for name, text in texts.items() if "FROM provenance_children AS" in text}
    assert downward >= {
        "blast_radius.sql", "blast_radius_by_source.sql", "blast_radius_ids_by_source.sql",
        "invalidate_by_transform_version.sql", "invalidate_by_index_snapshot.sql",
        "stale_sources.sql", "claim_verdicts.sql", "suspicious_hops.sql", "statement_verdicts.sql",
        "verdict_history.sql",
    }  # fmt: skip


# --- 6. the named-query files ------------------------------------------------------------------

EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)
# Sensible values for every psql variable the files use, by name.
SAMPLE_VALUES: dict[str, Any] = {
    "application_name": "lineage test",
    "tenant_id": "default",
    "context_id": "nope",
    "context_ids": ["nope"],
    "content_hashes": ["sha256:nope"],
    "source_uris": ["s3://nope"],
    "trace_ids": ["nope"],
    "max_spans": 10,
    "max_depth": 20,
    "kind": "any",
    "source_uri": "any",
    "transform_version": "chunker@1.4",
    "index_snapshot": "idx_none",
    "trace_id": "any",
    "produced_by": "any",
    "session_id": "any",
    "since": EARLIEST,
    "until": LATEST,
    "after_created_at": EARLIEST,
    "after_context_id": "",
    "page_size": 10,
    "bucket": "1 day",
    "texts": [],
}


def package_string_literals() -> set[str]:
    found: set[str] = set()
    for path in Path(lineage.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


def test_every_sql_file_is_loaded_and_named_in_the_package() -> None:
    stems = {path.stem for path in SQL_DIR.glob("*.sql")}
    assert set(QUERIES) == stems
    assert set(load()) == stems
    unused = stems - package_string_literals()
    assert unused == set(), f"sql files no Python code names: {sorted(unused)}"


# The writes get one real row each (rolled back); their arrays must line up.
WRITE_VALUES: dict[str, dict[str, Any]] = {
    "append_contexts": {
        "context_ids": ["sample_doc"],
        "parent_id_lists": ["{}"],
        "kinds": ["document"],
        "source_uris": ["s3://sample.md"],
        "content_hashes": ["sha256:" + "0" * 64],
        "transforms": ["loader"],
        "transform_versions": ["loader@1"],
        "produced_bys": [None],
        "index_snapshots": [None],
        "trace_ids": [None],
        "created_ats": [datetime.now(UTC)],
        "attribute_docs": ["{}"],
    },
    "record_root_sources": {
        "context_ids": ["sample_doc"],
        "kinds": ["document"],
        "source_uris": ["s3://sample.md"],
        "depths": [0],
        "created_ats": [datetime.now(UTC)],
    },
    "partitions_add": {"from_time": datetime.now(UTC), "through": datetime.now(UTC)},
    "retention_apply": {"now": datetime.now(UTC)},
    "partitions_shape": {"now": datetime.now(UTC)},
    "retention_policy_set": {"keep_months": 0},
    "audit_append": {"key_id": "k", "action": "walk", "target": "t", "detail": {}, "at": None},
    "audit_list": {"limit": 10},
    "operator_audit_list": {"limit": 10},
    "bundle_records": {"tree_size": 10},
    "bundle_import_settings": {
        **dict.fromkeys(
            ("capture_source_text", "capture_query_text", "capture_answer_text"), False
        ),
        "text_hash_key": bytes(32),
    },
    # NULL retires no key (the sample tenant's own one is held by its settings' foreign key).
    "bundle_retire_text_keys": {"text_hash_key": None},
    "bundle_import_texts": {"texts": [], "captured_ats": []},
    "bundle_import_expiry": {"expired_before": datetime(2024, 1, 1, tzinfo=UTC)},
    "bundle_import_tombstone": {
        "parent_ids": ["nope"],
        "kind": "tombstone",
        "content_hash": "sha256:nope",
        "transform": "forget",
        "created_at": datetime(2024, 1, 1, tzinfo=UTC),
        "attributes": "{}",
        "key_id": "k",
        "signature": b"s",
    },
    "key_create": {"key_id": "k", "scope": "read", "key_hash": b"h", "label": ""},
    "key_revoke": {"key_id": "k"},
    "key_lookup": {"key_id": "k"},
    "record_transform_versions": {
        "transform_versions": ["loader@1"],
        "version_keys": ["k"],
        "first_seens": [datetime(2026, 1, 1, tzinfo=UTC)],
    },
    # The verifiable log's queries (tests/test_log.py runs them for real).
    "log_queued_records": {"batch_size": 10},
    "log_append_leaves": {
        "leaf_indexes": [0],
        "created_ats": [datetime(2026, 1, 1, tzinfo=UTC)],
    },
    "log_append_nodes": {"levels": [0], "node_indexes": [0], "hashes": [bytes(32)]},
    "log_advance_head": {"tree_size": 0, "root_hash": bytes(32)},
    "log_dequeue": {"queued_ids": []},
    "log_nodes": {"levels": [0], "node_indexes": [0]},
    "log_checkpoints": {"after": 0, "limit": 10},
    "log_save_checkpoint": {
        "tree_size": 0,
        "root_hash": bytes(32),
        "signed_at": datetime(2026, 1, 1, tzinfo=UTC),
        "note": "n",
    },
    "tenant_settings_update": dict.fromkeys(
        ("capture_source_text", "capture_query_text", "capture_answer_text")
    ),
    # A signature needs a stored record (foreign key): tests/test_signing.py writes real ones.
    "signature_append": {"context_ids": [], "key_ids": [], "signatures": [], "created_ats": []},
    # Spans and the live event stream (tests/test_telemetry.py and test_events.py run them).
    "append_spans": {
        "span_trace_ids": ["4bf92f3577b34da6a3ce929d0e0e4736"],
        "span_ids": ["00f067aa0ba902b7"],
        "parent_span_ids": [None],
        "span_names": ["retrieve"],
        "span_kinds": ["INTERNAL"],
        "service_names": [None],
        "start_times": [datetime(2026, 1, 1, tzinfo=UTC)],
        "end_times": [datetime(2026, 1, 1, tzinfo=UTC)],
        "status_codes": ["UNSET"],
        "status_messages": [None],
        "attribute_docs": ["{}"],
    },
    "trace_spans": {"max_spans": 10},
    "events_after": {"after": 0, "session_id": "any"},
    "events_append": {"context_ids": ["sample_doc"]},
    "events_notify": {"payload": "1:default"},
    "open_partitions_check": {"now": datetime(2026, 12, 1, tzinfo=UTC), "add": True},
}
# Run as the owner: the application role may not create tenants.
OWNER_ONLY = {
    "tenant_create", "tenant_delete", "operator_audit_list", "bundle_import_settings",
    "bundle_retire_text_keys", "bundle_import_expiry", "bundle_import_tombstone", "bundle_analyze",
    "bundle_export_analyze", "lock_waits",
    "retention_policy_get",
    "retention_policy_set", "partitions_shape", "open_partitions_check", "open_partitions_validate",
}  # fmt: skip
# Files that act on what another file made first, in the same transaction.
MADE_BY = {"open_partitions_validate": "open_partitions_check"}
# Reads of provenance: on an empty database they find nothing.
READS = {
    "walk_back", "blast_radius", "blast_radius_by_source", "invalidate_by_transform_version",
    "invalidate_by_index_snapshot", "stale_sources", "suspicious_hops", "trace_contexts",
    "list_contexts", "get_contexts",
}  # fmt: skip


async def test_every_sql_file_prepares_and_runs_on_an_empty_database(
    pool: asyncpg.Pool, owner: asyncpg.Connection
) -> None:
    variable = re.compile(r"(?<![:\w]):'?[A-Za-z_]")
    assert set(QUERIES) >= READS | set(WRITE_VALUES)
    for path in sorted(SQL_DIR.glob("*.sql")):
        query = parse(path.read_text(), path.stem)
        assert query.name == path.stem
        assert not variable.search(query.sql), f"{path.name}: a psql variable was left in"
        assert not query.sql.endswith(";")
        values = SAMPLE_VALUES | WRITE_VALUES.get(query.name, {})
        missing = set(query.parameters) - set(values)
        assert not missing, f"{path.name}: add sample values for {sorted(missing)}"
        async with pool.acquire() as connection:
            chosen = owner if query.name in OWNER_ONLY else connection
            transaction = chosen.transaction()
            await transaction.start()
            await db.set_tenant(chosen, "default")
            try:
                if query.name in MADE_BY:
                    first = QUERIES[MADE_BY[query.name]]
                    await chosen.fetch(
                        first.sql, *first.arguments(values | WRITE_VALUES[first.name])
                    )
                statement = await chosen.prepare(query.sql)
                assert len(statement.get_parameters()) == len(query.parameters), path.name
                rows = await statement.fetch(*query.arguments(values))
            finally:
                await transaction.rollback()
        if query.name in READS:
            assert rows == [], f"{path.name} found rows in an empty database"
        elif query.name == "append_contexts":
            assert [row["context_id"] for row in rows] == ["sample_doc"]


# --- 7. tenant confinement ---------------------------------------------------------------------


def other_incident() -> list[Derivation]:
    """The demo ids again with other text, a different shape and an employee-policy revision."""
    items = []
    for item in INCIDENT:
        if item.context_id in {"doc_contractors_v2", "chunk_58"}:
            continue  # in "other" the contractor policy was never revised...
        changes: dict[str, Any] = {
            "text": f"[other] {item.text}",
            "attributes": {**item.attributes, "tenant": "other"},
        }
        if item.context_id == "chunk_17":  # ...and chunker@1.4 is the newest chunker
            changes |= {"version": "1.4", "index_snapshot": "idx_2026_08_01"}
        items.append(dataclasses.replace(item, **changes))
    # ...but the employee policy was revised after everything else.
    revised = Derivation(
        [], "[other] Employee leave policy, revised.", "document", "loader", "1.2.0",
        source_uri=EMPLOYEE_POLICY, context_id="doc_employee_leave_v2",
        attributes={"tenant": "other"},
    )  # fmt: skip
    return [*items, revised]


DEMO_ANCESTORS = {
    "answer_1", "claim_1", "query_1", "summary_1", "chunk_17", "chunk_42",
    "doc_employee_leave_v1", "doc_contractors_v1",
}  # fmt: skip
BELOW_CHUNK_42 = {"chunk_42", "retrieval_1", "summary_1", "claim_1", "answer_1"}
BELOW_CHUNK_17 = {"chunk_17", "retrieval_1", "summary_1", "claim_1", "answer_1"}
TRACE_IDS = {"query_1", "retrieval_1", "summary_1", "claim_1", "answer_1"}
ALL_DEMO_IDS = {item.context_id for item in INCIDENT if item.context_id}

# For each tenant and named read query: the ids it must return (and the suspicious reasons).
EXPECTED: dict[str, dict[str, Any]] = {
    "default": {
        "walk_back": DEMO_ANCESTORS,
        "blast_radius": {"doc_contractors_v1"} | BELOW_CHUNK_42,
        "blast_radius_by_source": {"doc_contractors_v1", "doc_contractors_v2", "chunk_58"}
        | BELOW_CHUNK_42,
        "invalidate_by_transform_version": BELOW_CHUNK_42,
        "invalidate_by_index_snapshot": BELOW_CHUNK_42,
        "stale_sources": {"doc_contractors_v1"} | BELOW_CHUNK_42,
        "trace_contexts": TRACE_IDS,
        "list_contexts": ALL_DEMO_IDS,
        "get_contexts": ALL_DEMO_IDS,
        "suspicious_hops": {
            ("chunk_42", "old_transform_version"),
            ("chunk_42", "snapshot_predates_revision"),
            ("doc_contractors_v1", "source_changed"),
        },
    },
    "other": {
        "walk_back": DEMO_ANCESTORS,
        "blast_radius": {"doc_contractors_v1"} | BELOW_CHUNK_42,
        "blast_radius_by_source": {"doc_contractors_v1"} | BELOW_CHUNK_42,
        "invalidate_by_transform_version": BELOW_CHUNK_42 | BELOW_CHUNK_17,
        "invalidate_by_index_snapshot": BELOW_CHUNK_42 | BELOW_CHUNK_17,
        "stale_sources": {"doc_employee_leave_v1"} | BELOW_CHUNK_17,
        "trace_contexts": TRACE_IDS,
        "list_contexts": ALL_DEMO_IDS - {"doc_contractors_v2", "chunk_58"}
        | {"doc_employee_leave_v2"},
        "get_contexts": ALL_DEMO_IDS - {"doc_contractors_v2", "chunk_58"}
        | {"doc_employee_leave_v2"},
        "suspicious_hops": {
            ("chunk_17", "snapshot_predates_revision"),
            ("doc_employee_leave_v1", "source_changed"),
        },
    },
}


async def read_everything(database: Database, settings: Settings, tenant: str) -> dict[str, Any]:
    """Every named read query for one tenant, through reads.run."""
    common: dict[str, Any] = {"tenant_id": tenant, "kind": "all", "max_depth": 20}
    asks: dict[str, dict[str, Any]] = {
        "walk_back": {"context_id": ANSWER_ID},
        "blast_radius": {"context_ids": ["doc_contractors_v1"]},
        "blast_radius_by_source": {"source_uri": CONTRACTOR_POLICY},
        "invalidate_by_transform_version": {"transform_version": "chunker@1.4"},
        "invalidate_by_index_snapshot": {"index_snapshot": "idx_2026_08_01"},
        "stale_sources": {"source_uri": "any"},
        "trace_contexts": {"trace_id": TRACE_ID},
        "list_contexts": {"page_size": 1000, "kind": "any"},  # its match-all is 'any'
        "suspicious_hops": {"context_id": ANSWER_ID},
        "get_contexts": {"context_ids": sorted(ALL_DEMO_IDS | {"doc_employee_leave_v2"})},
    }
    results: dict[str, Any] = {}
    for name, values in asks.items():
        wanted = set(QUERIES[name].parameters)
        given = {k: v for k, v in (SAMPLE_VALUES | common | values).items() if k in wanted}
        results[name] = await reads.run(database, settings, name, **given)
    return results


async def test_every_read_query_is_confined_to_its_tenant(
    store: PostgresStore,
    database: Database,
    settings: Settings,
    owner: asyncpg.Connection,
) -> None:
    await db.fetch(owner, "tenant_create", tenant_id="other")  # with its text hash key
    other_store = PostgresStore(database, "other")
    mine = {c.context_id: c.record.content_hash for c in await load_incident(store)}
    # One call per record, as load_incident does, so each revision has its own created_at.
    loaded = [(await derive_many(other_store, [item]))[0] for item in other_incident()]
    theirs = {c.context_id: c.record.content_hash for c in loaded}
    hashes = {"default": mine, "other": theirs}
    assert not set(mine.values()) & set(theirs.values())
    assert set(EXPECTED["default"]) <= set(QUERIES)

    for tenant in ("default", "other"):
        results = await read_everything(database, settings, tenant)
        assert set(results) == set(EXPECTED[tenant])
        for name, rows in results.items():
            if name == "suspicious_hops":
                got = {(row["context_id"], row["reason"]) for row in rows}
                assert got == EXPECTED[tenant][name], (tenant, name)
                continue
            ids = [row["context_id"] for row in rows]
            assert len(ids) == len(set(ids)), (tenant, name)
            assert set(ids) == EXPECTED[tenant][name], (tenant, name)
            # Same ids in both tenants: only the hash and attributes tell whose row it is.
            assert all(row["content_hash"] == hashes[tenant][row["context_id"]] for row in rows), (
                tenant,
                name,
            )
            marked = {row["attributes"].get("tenant") for row in rows}
            assert marked == ({"other"} if tenant == "other" else {None}), (tenant, name)

    # An id only "other" holds is unknown to "default".
    with pytest.raises(NotFound):
        await walks.walk_back(database, settings, "default", "doc_employee_leave_v2", 20)
    assert (await PostgresStore(database).get("doc_employee_leave_v2")) is None


# --- 8. bad parameters over HTTP ---------------------------------------------------------------


async def test_bad_parameters_over_http(store: PostgresStore, client: httpx.AsyncClient) -> None:
    await load_incident(store)
    for path in (
        "/v1/contexts/unknown_1",
        "/v1/contexts/unknown_1/lineage",
        "/v1/contexts/unknown_1/impact",
        "/v1/contexts/unknown_1/suspicious",
        "/v1/traces/unknown_trace",
    ):
        body = assert_problem(await client.get(path), 404, "unknown_")
        assert body["title"] == "NotFound"

    for path in ("lineage", "impact", "suspicious"):
        for depth in (-1, 101):
            response = await client.get(f"/v1/contexts/{ANSWER_ID}/{path}?max_depth={depth}")
            assert_problem(response, 422, "max_depth must be between 0 and 100")
        assert_problem(await client.get(f"/v1/contexts/{ANSWER_ID}/{path}?max_depth=x"), 422)
    for depth in (-1, 101):
        response = await client.get("/v1/impact", params={"source_uri": "s", "max_depth": depth})
        assert_problem(response, 422, "max_depth")
        assert_problem(await client.get(f"/v1/freshness?max_depth={depth}"), 422, "max_depth")

    for path in (f"/v1/contexts/{ANSWER_ID}/impact", "/v1/freshness", "/v1/contexts"):
        assert_problem(await client.get(f"{path}?kind=bogus"), 422, "'bogus' is not a kind")
    response = await client.get("/v1/impact", params={"source_uri": "s", "kind": "bogus"})
    assert_problem(response, 422, "'bogus' is not a kind")

    exactly_one = "give exactly one of source_uri, transform_version, index_snapshot"
    assert_problem(await client.get("/v1/impact"), 422, exactly_one)
    for two in (
        {"source_uri": CONTRACTOR_POLICY, "transform_version": "chunker@1.4"},
        {"source_uri": CONTRACTOR_POLICY, "index_snapshot": "idx_2026_08_01"},
        {"transform_version": "chunker@1.4", "index_snapshot": "idx_2026_08_01"},
    ):
        assert_problem(await client.get("/v1/impact", params=two), 422, exactly_one)


# --- 9. API, CLI and SQL agree on the demo -----------------------------------------------------

DEMO_SUSPICIOUS = EXPECTED["default"]["suspicious_hops"]


async def test_api_cli_and_sql_return_the_same_nodes_for_the_demo(
    store: PostgresStore,
    pool: asyncpg.Pool,
    database: Database,
    settings: Settings,
    client: httpx.AsyncClient,
    database_url: str,
) -> None:
    await load_incident(store)
    # Walk-back from the answer.
    sql_rows = await run_sql(
        pool, "walk_back", tenant_id="default", context_id=ANSWER_ID, max_depth=20
    )
    expected = depths(sql_rows)
    assert set(expected) == DEMO_ANCESTORS
    api = (await client.get(f"/v1/contexts/{ANSWER_ID}/lineage")).json()
    assert depths(api["nodes"]) == expected
    cli_walk = json.loads(await run_cli(database_url, "walk", ANSWER_ID, "--format", "json"))
    assert depths(cli_walk["nodes"]) == expected
    assert sorted(map(json.dumps, cli_walk["edges"])) == sorted(map(json.dumps, api["edges"]))
    sql_run = await run_cli(
        database_url, "sql", "run", "walk_back",
        "-v", "tenant_id=default", "-v", f"context_id={ANSWER_ID}", "-v", "max_depth=20",
    )  # fmt: skip
    assert depths([json.loads(line) for line in sql_run.splitlines()]) == expected

    # Impact of the contractor policy (all revisions).
    sql_impact = await run_sql(
        pool, "blast_radius_by_source",
        tenant_id="default", source_uri=CONTRACTOR_POLICY, kind="any", max_depth=20,
    )  # fmt: skip
    expected_impact = depths(sql_impact)
    assert set(expected_impact) == EXPECTED["default"]["blast_radius_by_source"]
    api_impact = (await client.get("/v1/impact", params={"source_uri": CONTRACTOR_POLICY})).json()
    assert depths(api_impact["nodes"]) == expected_impact
    cli_impact = await run_cli(
        database_url, "impact", "--source-uri", CONTRACTOR_POLICY, "--format", "ndjson"
    )
    records, summary = ndjson_lines(cli_impact)
    assert depths(records) == expected_impact
    assert summary == api_impact["summary"]
    assert summary["total"] == len(expected_impact)

    # Suspicious hops: the query, the API and the CLI flag the same hops, and only those.
    hops = await walks.suspicious_hops(database, settings, "default", ANSWER_ID, None)
    assert {(h["context_id"], h["reason"]) for h in hops} == DEMO_SUSPICIOUS
    api_hops = (await client.get(f"/v1/contexts/{ANSWER_ID}/suspicious")).json()["hops"]
    assert {(h["context_id"], h["reason"]) for h in api_hops} == DEMO_SUSPICIOUS
    assert {(h["context_id"], h["reason"]) for h in cli_walk["suspicious"]} == DEMO_SUSPICIOUS


# --- 10. invalidation, freshness and the kind filter -------------------------------------------


async def test_invalidation_freshness_and_kind_filters_on_the_demo(
    store: PostgresStore, database: Database, settings: Settings, client: httpx.AsyncClient
) -> None:
    await load_incident(store)

    async def ask(name: str, kind: str, **values: Any) -> dict[str, int]:
        return depths(
            await reads.run(
                database,
                settings,
                name,
                tenant_id="default",
                kind=kind,
                max_depth=20,
                **values,
            )
        )

    by_version = await ask(
        "invalidate_by_transform_version", "answer", transform_version="chunker@1.4"
    )
    assert by_version == {ANSWER_ID: 3}
    by_snapshot = await ask(
        "invalidate_by_index_snapshot", "answer", index_snapshot="idx_2026_08_01"
    )
    assert by_snapshot == {ANSWER_ID: 3}
    stale = {
        "doc_contractors_v1": 0, "chunk_42": 1, "retrieval_1": 2, "summary_1": 2,
        "claim_1": 3, ANSWER_ID: 4,
    }  # fmt: skip
    assert await ask("stale_sources", "any", source_uri="any") == stale
    assert await ask("stale_sources", "any", source_uri=CONTRACTOR_POLICY) == stale
    assert await ask("stale_sources", "any", source_uri=EMPLOYEE_POLICY) == {}

    response = await client.get(
        "/v1/impact", params={"transform_version": "chunker@1.4", "kind": "answer"}
    )
    assert depths(response.json()["nodes"]) == {ANSWER_ID: 3}
    response = await client.get(
        "/v1/impact", params={"index_snapshot": "idx_2026_08_01", "kind": "answer"}
    )
    assert depths(response.json()["nodes"]) == {ANSWER_ID: 3}
    assert depths((await client.get("/v1/freshness")).json()["nodes"]) == stale

    verdict: Context = await derive(
        store, [ANSWER_ID], "Wrong: contractors get 14 days.", "verdict", context_id="verdict_1"
    )
    assert verdict.record.kind == "verdict"
    assert await ask("stale_sources", "any", source_uri="any") == stale
    assert await ask("stale_sources", "all", source_uri="any") == stale | {"verdict_1": 5}
    assert await ask("stale_sources", "verdict", source_uri="any") == {"verdict_1": 5}
    assert "verdict_1" not in await ask("blast_radius", "any", context_ids=["doc_contractors_v1"])
    assert (await ask("blast_radius", "all", context_ids=["doc_contractors_v1"]))["verdict_1"] == 5
    everything = await client.get("/v1/freshness", params={"kind": "all"})
    assert depths(everything.json()["nodes"]) == stale | {"verdict_1": 5}
    summary = (await client.get("/v1/freshness")).json()["summary"]
    assert "verdict" not in summary["counts_by_kind"]


async def test_invalidation_ids_are_the_records_rows_and_download_as_a_file(
    store: PostgresStore, pool: asyncpg.Pool, settings: Settings, client: httpx.AsyncClient
) -> None:
    await load_incident(store)
    database = Database(pool, Settings())
    for parameter, value in (
        ("transform_version", "chunker@1.4"),
        ("index_snapshot", "idx_2026_08_01"),
    ):
        for kind in ("answer", "any", "all"):
            values = {"tenant_id": "default", "kind": kind, "max_depth": 20, parameter: value}
            records = await reads.run(database, settings, walks.IMPACT_QUERIES[parameter], **values)
            ids = await reads.run(database, settings, walks.IMPACT_ID_QUERIES[parameter], **values)
            columns = ("context_id", "kind", "depth", "truncated", "expired")
            assert [[r[c] for c in columns] for r in ids] == [
                [r[c] for c in columns] for r in records
            ]
            assert records, (parameter, kind)
        response = await client.get(
            "/v1/impact/ids", params={parameter: value, "kind": "answer", "format": "json"}
        )
        assert response.status_code == 200, response.text
        document = response.json()
        assert document["start"] == {parameter: value}
        assert [(r["context_id"], r["depth"]) for r in document["records"]] == [(ANSWER_ID, 3)]
        both = await client.get(
            "/v1/impact/ids", params={parameter: value, "source_uri": CONTRACTOR_POLICY}
        )
        assert both.status_code == 422 and "exactly one of" in both.json()["detail"]


async def test_list_contexts_kind_all_lists_every_kind(
    store: PostgresStore, client: httpx.AsyncClient
) -> None:
    await load_incident(store)
    listed_any = (await client.get("/v1/contexts", params={"kind": "any"})).json()["records"]
    assert {r["context_id"] for r in listed_any} == ALL_DEMO_IDS
    # The API accepts kind=all (check_kind), so it must not quietly match nothing.
    response = await client.get("/v1/contexts", params={"kind": "all"})
    assert response.status_code == 200, response.text
    listed_all = response.json()["records"]
    assert {r["context_id"] for r in listed_all} == ALL_DEMO_IDS, (
        "BUG sql/list_contexts.sql: kind=all is accepted by walks.check_kind but matches no row"
    )


async def test_revisions_in_one_batch_are_stale_for_freshness_and_suspicious_hops_alike(
    store: PostgresStore, database: Database, settings: Settings
) -> None:
    # One batch stamps one created_at, so only the context_id can order these two revisions.
    await derive_many(
        store,
        [
            Derivation([], "v1", "document", source_uri="s3://same.md", context_id="same_v1"),
            Derivation([], "v2", "document", source_uri="s3://same.md", context_id="same_v2"),
            Derivation(["same_v1"], "chunk of v1", "chunk", context_id="same_chunk"),
        ],
    )
    hops = await walks.suspicious_hops(database, settings, "default", "same_chunk", None)
    changed = {hop["context_id"] for hop in hops if hop["reason"] == "source_changed"}
    stale = await reads.run(
        database, settings, "stale_sources",
        tenant_id="default", source_uri="any", kind="all", max_depth=20,
    )  # fmt: skip
    stale_roots = {node["context_id"] for node in stale if node["depth"] == 0}
    assert changed == {"same_v1"}  # suspicious_hops breaks the tie by context_id
    assert stale_roots == changed, (
        "BUG sql/stale_sources.sql: `newer.created_at > old.created_at` finds no newer revision "
        "when both share a created_at, while suspicious_hops.sql orders by (created_at, "
        "context_id); compare (newer.created_at, newer.context_id) > (old.created_at, "
        "old.context_id)"
    )
