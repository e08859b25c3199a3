"""Walks over the demo incident: bad parameters over HTTP, the API, CLI and SQL files agreeing,
invalidation, freshness and the kind filter."""

import json
from typing import Any

import asyncpg
import httpx

from lineage.core.derive import Context, Derivation, derive, derive_many
from lineage.db.database import Database
from lineage.services import reads, walks
from lineage.services.demo import ANSWER_ID, CONTRACTOR_POLICY, EMPLOYEE_POLICY, load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.walks_helpers import (
    ALL_DEMO_IDS,
    DEMO_ANCESTORS,
    EXPECTED,
    assert_problem,
    depths,
    ndjson_lines,
    run_cli,
    run_sql,
)

# --- bad parameters over HTTP ------------------------------------------------------------------


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


# --- API, CLI and SQL agree on the demo --------------------------------------------------------

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


# --- invalidation, freshness and the kind filter -----------------------------------------------


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


async def test_a_walk_down_by_id_lists_the_ids_of_its_records_and_downloads_them(
    store: PostgresStore, pool: asyncpg.Pool, settings: Settings, client: httpx.AsyncClient
) -> None:
    # blast_radius_ids reads no record below its starts: the same rows as the records' walk.
    await load_incident(store)
    database = Database(pool, Settings())
    columns = ("context_id", "kind", "depth", "truncated", "expired")
    for starts in (["doc_contractors_v1"], ["chunk_42"], ["doc_contractors_v1", "missing"]):
        for kind in ("answer", "any", "all"):
            for max_depth in (20, 1):
                values: dict[str, Any] = {"tenant_id": "default", "kind": kind}
                values |= {"max_depth": max_depth, "context_ids": starts}
                records = await reads.run(database, settings, "blast_radius", **values)
                ids = await reads.run(database, settings, "blast_radius_ids", **values)
                assert [[r[c] for c in columns] for r in ids] == [
                    [r[c] for c in columns] for r in records
                ], (starts, kind, max_depth)
    response = await client.get(
        "/v1/impact/ids", params={"context_id": "doc_contractors_v1", "kind": "all"}
    )
    assert response.status_code == 200, response.text
    everything = {"tenant_id": "default", "kind": "all", "max_depth": 20}
    records = await reads.run(
        database, settings, "blast_radius", context_ids=["doc_contractors_v1"], **everything
    )
    lines = response.text.splitlines()
    assert [line.split(",")[:3] for line in lines[1:]] == [
        [r["context_id"], r["kind"], str(r["depth"])] for r in records
    ]
    assert len(records) > 5 and ANSWER_ID in {r["context_id"] for r in records}
