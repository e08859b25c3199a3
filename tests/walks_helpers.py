"""What the walk tests share: helpers to run and explain the named queries, the graphs they
load, sample values for every query parameter, and what each read must answer on the demo."""

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
from typer.testing import CliRunner

from lineage import cli, db
from lineage.api.app import create_app
from lineage.core.derive import Derivation
from lineage.db.named_sql import QUERIES
from lineage.services.demo import INCIDENT
from lineage.settings import Settings

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


async def explain_generic_as_app(
    pool: asyncpg.Pool, name: str, **values: Any
) -> list[dict[str, Any]]:
    """The plan made for any values (plan_cache_mode force_generic_plan), as a function planned
    so runs it, as the application role."""
    async with db.transaction(pool, values["tenant_id"]) as connection:
        return await _explained(connection, name, values, generic=True)


async def plan_cache_mode(owner: asyncpg.Connection, function: str | None) -> str | None:
    """The plan_cache_mode a function sets for its statements; None where it sets none."""
    config = await owner.fetchval("SELECT proconfig FROM pg_proc WHERE proname = $1", function)
    modes = [s.partition("=")[2] for s in config or () if s.startswith("plan_cache_mode=")]
    return modes[0] if modes else None


async def _explained(
    connection: asyncpg.Connection, name: str, values: dict[str, Any], generic: bool = False
) -> list[dict[str, Any]]:
    query = QUERIES[name]
    await connection.execute("SET LOCAL jit = off")
    explained, arguments = query.sql, query.arguments(values)
    if generic:
        # EXPLAIN EXECUTE takes no parameters: each value goes as a literal of its type.
        await connection.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        parameters = (await connection.prepare(query.sql)).get_parameters()
        types = [
            await connection.fetchval("SELECT format_type($1, NULL)", t.oid) for t in parameters
        ]
        literals = [
            f"{await connection.fetchval(f'SELECT quote_nullable($1::{kind})', value)}::{kind}"
            for kind, value in zip(types, arguments, strict=True)
        ]
        await connection.execute(f"PREPARE explained ({', '.join(types)}) AS {query.sql}")
        explained, arguments = f"EXECUTE explained ({', '.join(literals)})", []
    text = await connection.fetchval(
        f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) {explained}", *arguments
    )
    if generic:
        await connection.execute("DEALLOCATE explained")
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


# With no retention period each partitioned table has one partition (migration 0018).
PARTITION = "_p_open"


def seq_scans_of_the_records(plan: list[dict[str, Any]]) -> list[str]:
    """Sequential scans of the partition that holds the records."""
    return [
        node["Relation Name"]
        for node in plan
        if node["Node Type"] == "Seq Scan" and node["Relation Name"] == "provenance" + PARTITION
    ]


# Connections of the database under test left inside a transaction.
OPEN_TRANSACTIONS = """
SELECT count(*) FROM pg_stat_activity
 WHERE datname = current_database() AND state LIKE 'idle in transaction%'
"""


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
        INSERT INTO provenance_children (tenant_id, parent_key, context_id, created_at, kind)
        SELECT tenant_id, md5(unnest(parent_ids))::uuid, context_id, created_at, kind
        FROM provenance;
        """
    )


# --- sample values and the demo's expected answers ---------------------------------------------


EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)
# Sensible values for every psql variable the files use, by name.
SAMPLE_VALUES: dict[str, Any] = {
    "application_name": "lineage test",
    "tenant_id": "default",
    "context_id": "nope",
    "context_ids": ["nope"],
    "content_hashes": ["sha256:nope"],
    "key_nos": [1],
    "source_uris": ["s3://nope"],
    "trace_ids": ["nope"],
    "max_spans": 10,
    "max_depth": 20,
    "kind": "any",
    "source_uri": "any",
    "transform_version": "chunker@1.4",
    "index_snapshot": "idx_none",
    "embedding_model": "embedder_none",
    "trace_id": "any",
    "produced_by": "any",
    "session_id": "any",
    "since": EARLIEST,
    "until": LATEST,
    "after_created_at": EARLIEST,
    "after_context_id": "",
    "after_audit_id": 0,
    "page_size": 10,
    "bucket": "1 day",
    "texts": [],
}


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
