"""Walks on graphs of every shape against a real PostgreSQL: minimal depths on DAGs, a
document with thousands of descendants and its NDJSON stream, truncation by depth, and walks
past the statement timeout."""

from collections import Counter

import asyncpg
import httpx
import pytest

from lineage.core.derive import Derivation, derive_many
from lineage.core.errors import WalkTimeout
from lineage.db.database import Database
from lineage.services import reads, walks
from lineage.services.demo import CONTRACTOR_POLICY, load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.walks_helpers import (
    FAN_COUNTS,
    FAN_SUMMARIES,
    FAN_TOTAL,
    LAYERS,
    NDJSON,
    OPEN_TRANSACTIONS,
    WIDE,
    Node,
    assert_problem,
    chain,
    depths,
    fan,
    ladder,
    load_wide,
    ndjson_lines,
    run_sql,
    serve,
)

# --- minimal depths on DAGs --------------------------------------------------------------------


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


# --- a document with thousands of descendants --------------------------------------------------


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


# --- truncation --------------------------------------------------------------------------------


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


# --- timeouts ----------------------------------------------------------------------------------


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
