"""OpenLineage in: the unmodified openlineage-python client, over its HTTP transport, feeds a
real server; the records and their edges are then read from the database."""

import asyncio
import gzip
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest
import requests
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import (
    DatasetEvent,
    InputDataset,
    Job,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
    StaticDataset,
)
from openlineage.client.facet_v2 import source_code_location_job
from openlineage.client.serde import Serde

from lineage import derive
from lineage.api.app import create_app
from lineage.core.hashing import content_hash
from lineage.core.record import deterministic_context_id
from lineage.db.database import Database
from lineage.services import auth
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.live_server import serve

TENANT = "acme"
MAX_BODY = 64 * 1024
RAW = ("s3://lake", "raw/orders.csv")
ORDERS = ("postgres://db:5432", "warehouse.public.orders")
REPORT = ("s3://reports/", "/daily/orders.parquet")
LOAD = Job(
    namespace="etl",
    name="load_orders",
    facets={
        "sourceCodeLocation": source_code_location_job.SourceCodeLocationJobFacet(
            type="git", url="https://git.example/etl", version="abc123"
        )
    },
)
REPORT_JOB = Job(namespace="etl", name="report_orders")


@pytest.fixture
def server(database_url: str) -> Iterator[str]:
    """The service under uvicorn on a free loopback port: the client is synchronous."""
    settings = Settings(statement_timeout_ms=5000, auth="keys", max_body_bytes=MAX_BODY)
    with serve(create_app(settings, database_url=database_url)) as url:
        yield url


@pytest.fixture
async def key(database: Database, owner_database: Database) -> str:
    """An ingest key of tenant acme (tenants are created as the owner)."""
    await auth.create_tenant(owner_database, TENANT)
    token, _ = await auth.create_key(database, TENANT, "ingest")
    return token


def lineage_client(url: str, key: str | None, *, compress: bool = True) -> OpenLineageClient:
    transport: dict[str, Any] = {"type": "http", "url": url}
    if key:
        transport["auth"] = {"type": "api_key", "apiKey": key}
    if compress:
        transport["compression"] = "gzip"
    return OpenLineageClient(config={"transport": transport})


def dataset(kind: type[InputDataset] | type[OutputDataset], where: tuple[str, str]) -> Any:
    return kind(namespace=where[0], name=where[1])


def run_event(
    state: RunState,
    run_id: str,
    job: Job,
    inputs: list[tuple[str, str]],
    outputs: list[tuple[str, str]],
) -> RunEvent:
    return RunEvent(
        eventType=state,
        eventTime=datetime.now(UTC).isoformat(),
        run=Run(runId=run_id),
        job=job,
        inputs=[dataset(InputDataset, where) for where in inputs],
        outputs=[dataset(OutputDataset, where) for where in outputs],
    )


async def emit(client: OpenLineageClient, *events: RunEvent) -> None:
    for event in events:
        await asyncio.to_thread(client.emit, event)


def a_run(job: Job, inputs: list[tuple[str, str]], outputs: list[tuple[str, str]]) -> list[Any]:
    """START then COMPLETE, as an integration sends them."""
    run_id = str(uuid.uuid4())
    return [
        run_event(state, run_id, job, inputs, outputs)
        for state in (RunState.START, RunState.COMPLETE)
    ]


async def rows(owner: asyncpg.Connection) -> list[dict[str, Any]]:
    found = await owner.fetch(
        "SELECT context_id, parent_ids, kind, source_uri, content_hash, transform, "
        "transform_version, trace_id, attributes::text FROM provenance "
        "WHERE tenant_id = $1 ORDER BY created_at, context_id",
        TENANT,
    )
    return [dict(row) | {"attributes": json.loads(row["attributes"])} for row in found]


def by_uri(found: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in found:
        grouped.setdefault(row["source_uri"], []).append(row)
    return grouped


RAW_URI = "s3://lake/raw/orders.csv"
ORDERS_URI = "postgres://db:5432/warehouse.public.orders"
REPORT_URI = "s3://reports/daily/orders.parquet"


async def test_the_client_feeds_a_two_job_pipeline(
    server: str, key: str, owner: asyncpg.Connection
) -> None:
    load = a_run(LOAD, [RAW], [ORDERS])
    report = a_run(REPORT_JOB, [ORDERS], [REPORT])
    await emit(lineage_client(server, key), *load, *report)

    found = by_uri(await rows(owner))
    assert set(found) == {RAW_URI, ORDERS_URI, REPORT_URI}
    [raw], [orders], [report_row] = found[RAW_URI], found[ORDERS_URI], found[REPORT_URI]
    # An input never seen before enters as a root, identified by its namespace and name.
    identity = {"name": "raw/orders.csv", "namespace": "s3://lake"}
    digest = content_hash(json.dumps(identity, separators=(",", ":")))
    assert raw == {
        "context_id": deterministic_context_id(TENANT, "document", [], digest, RAW_URI, None),
        "parent_ids": [],
        "kind": "document",
        "source_uri": RAW_URI,
        "content_hash": digest,
        "transform": None,
        "transform_version": None,
        "trace_id": uuid.UUID(load[0].run.runId).hex,
        "attributes": {"openlineage": identity},
    }
    # Outputs hang from the run's inputs; the job is the transform, its code version the version.
    assert orders["parent_ids"] == [raw["context_id"]]
    assert (orders["kind"], orders["transform"], orders["transform_version"]) == (
        "document",
        "etl/load_orders",
        "etl/load_orders@abc123",
    )
    assert orders["trace_id"] == uuid.UUID(load[0].run.runId).hex
    assert orders["attributes"]["openlineage"]["run_id"] == load[0].run.runId
    # The next job read the first one's output: the graph runs through both.
    assert report_row["parent_ids"] == [orders["context_id"]]
    assert (report_row["transform"], report_row["transform_version"]) == ("etl/report_orders", None)

    # Replays, compressed or not, record nothing new.
    await emit(lineage_client(server, key, compress=False), *load, *report)
    await emit(lineage_client(server, key), *reversed(load + report))
    assert len(await rows(owner)) == 3


async def test_a_new_run_is_a_new_version_and_later_readers_follow_it(
    server: str, key: str, owner: asyncpg.Connection
) -> None:
    client = lineage_client(server, key)
    first_load, first_report = a_run(LOAD, [RAW], [ORDERS]), a_run(REPORT_JOB, [ORDERS], [REPORT])
    await emit(client, *first_load, *first_report)
    second_load, second_report = a_run(LOAD, [RAW], [ORDERS]), a_run(REPORT_JOB, [ORDERS], [REPORT])
    await emit(client, *second_load)
    # The first report run, replayed after a newer orders exists, still read the older one.
    await emit(client, *first_report)
    await emit(client, *second_report)

    found = by_uri(await rows(owner))
    [raw] = found[RAW_URI]
    old_orders, new_orders = found[ORDERS_URI]
    old_report, new_report = found[REPORT_URI]
    assert old_orders["parent_ids"] == new_orders["parent_ids"] == [raw["context_id"]]
    assert old_report["parent_ids"] == [old_orders["context_id"]]
    assert new_report["parent_ids"] == [new_orders["context_id"]]
    assert new_report["trace_id"] == uuid.UUID(second_report[0].run.runId).hex


async def test_an_input_a_pipeline_loaded_is_that_document(
    server: str, key: str, database: Database, owner: asyncpg.Connection
) -> None:
    policy = await derive(
        PostgresStore(database, TENANT),
        [],
        "Contractors receive 14 days' notice.",
        "document",
        "loader",
        "1.2.0",
        source_uri="s3://policies/contractors.md",
    )
    index_job = Job(namespace="rag", name="build_index")
    events = a_run(index_job, [("s3://policies", "contractors.md")], [("pgvector://rag", "chunks")])
    await emit(lineage_client(server, key), *events)

    found = by_uri(await rows(owner))
    assert set(found) == {"s3://policies/contractors.md", "pgvector://rag/chunks"}
    [index] = found["pgvector://rag/chunks"]
    assert index["parent_ids"] == [policy.context_id]


def raw_post(server: str, key: str, body: bytes, **headers: str) -> httpx.Response:
    return httpx.post(
        f"{server}/api/v1/lineage",
        content=body,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json", **headers},
    )


async def test_what_cannot_be_recorded_is_refused_with_what_to_fix(
    server: str, key: str, owner: asyncpg.Connection
) -> None:
    event = run_event(RunState.COMPLETE, str(uuid.uuid4()), REPORT_JOB, [ORDERS], [REPORT])
    with pytest.raises(requests.HTTPError) as unauthenticated:
        await emit(lineage_client(server, None), event)
    assert unauthenticated.value.response.status_code == 401

    dataset_event = DatasetEvent(
        eventTime=datetime.now(UTC).isoformat(),
        dataset=StaticDataset(namespace=RAW[0], name=RAW[1]),
    )
    client = lineage_client(server, key)
    with pytest.raises(requests.HTTPError) as refused:
        await asyncio.to_thread(client.emit, dataset_event)
    assert refused.value.response.status_code == 422
    assert refused.value.response.json()["rule"] == "openlineage_not_a_run_event"

    # A job named with '@' and versioned could not be told from its version.
    good = json.dumps(
        {
            "eventType": "COMPLETE",
            "eventTime": datetime.now(UTC).isoformat(),
            "run": {"runId": str(uuid.uuid4())},
            "job": {
                "namespace": "etl",
                "name": "report@v1",
                "facets": {"sourceCodeLocation": {"version": "9"}},
            },
            "inputs": [],
            "outputs": [{"namespace": "s3://r", "name": "x"}],
            "producer": "https://example.invalid",
            "schemaURL": "https://example.invalid",
        }
    )
    cases: list[tuple[bytes, dict[str, str], int, str]] = [
        (b"{not json", {}, 422, "openlineage_not_json"),
        (b"[]", {}, 422, "openlineage_not_json"),
        (b"not gzip", {"Content-Encoding": "gzip"}, 422, "gzip"),
        (gzip.compress(good.encode())[:-8], {"Content-Encoding": "gzip"}, 422, "truncated"),
        (good.encode(), {"Content-Encoding": "br"}, 415, "gzip or none"),
        (gzip.compress(b" " * (MAX_BODY + 1)), {"Content-Encoding": "gzip"}, 413, "inflates"),
        (good.replace('"runId"', '"id"').encode(), {}, 422, "run.runId"),
        (good.encode(), {}, 422, "openlineage_job_name"),
    ]
    for body, headers, status, says in cases:
        response = await asyncio.to_thread(raw_post, server, key, body, **headers)
        assert response.status_code == status, (body[:40], response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert says in response.text, response.text
    assert await rows(owner) == []


@pytest.mark.parametrize(
    "state",
    [RunState.START, RunState.RUNNING, RunState.OTHER, RunState.FAIL, RunState.ABORT],
)
async def test_only_a_completed_run_records_its_outputs(
    server: str, key: str, owner: asyncpg.Connection, state: RunState
) -> None:
    unfinished = run_event(state, str(uuid.uuid4()), LOAD, [RAW], [ORDERS])
    await emit(lineage_client(server, key), unfinished)
    found = by_uri(await rows(owner))
    assert set(found) - {None} == {RAW_URI}, f"a {state.value} run's output was recorded"
    answer = await asyncio.to_thread(
        raw_post, server, key, json.dumps(Serde.to_dict(unfinished)).encode()
    )
    assert answer.json()["state"] == state.value
    assert answer.json()["outputs_not_recorded"] == [ORDERS_URI]
    # A later completed run that reads the dataset does not walk back through the unwritten one.
    await emit(lineage_client(server, key), *a_run(REPORT_JOB, [ORDERS], [REPORT]))
    found = by_uri(await rows(owner))
    [orders] = found[ORDERS_URI]
    assert orders["parent_ids"] == [] and orders["transform"] is None  # a root, not LOAD's output
    [report] = found[REPORT_URI]
    assert report["parent_ids"] == [orders["context_id"]]


@pytest.mark.parametrize("state", [RunState.FAIL, RunState.ABORT])
async def test_a_failed_or_aborted_run_is_recorded_as_a_run_with_its_state(
    server: str, key: str, owner: asyncpg.Connection, state: RunState
) -> None:
    run_id = str(uuid.uuid4())
    failed = run_event(state, run_id, LOAD, [RAW], [ORDERS])
    await emit(lineage_client(server, key), failed)
    found = await rows(owner)
    [raw] = by_uri(found)[RAW_URI]
    [run] = [row for row in found if row["kind"] == "tool_call"]
    assert run["source_uri"] is None  # no later run reads it as a dataset
    assert run["parent_ids"] == [raw["context_id"]]
    assert run["trace_id"] == uuid.UUID(run_id).hex
    assert run["attributes"]["tool"] == run["transform"]
    assert run["attributes"]["openlineage"] == {
        "run_id": run_id, "state": state.value, "job": run["transform"],
        "outputs_not_recorded": [ORDERS_URI],
    }  # fmt: skip
    # Replayed, it records nothing new and names the same record.
    again = await asyncio.to_thread(
        raw_post, server, key, json.dumps(Serde.to_dict(failed)).encode()
    )
    assert again.json()["run_record"] == run["context_id"]
    assert len(await rows(owner)) == len(found)
