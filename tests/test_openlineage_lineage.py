"""OpenLineage's explicit lineage and facets: the unmodified openlineage-python client sends
runs whose lineage facet (or column-lineage facet) says which input each output comes from; the
records' edges and attributes are then read from the database."""

import asyncio
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    documentation_job,
    environment_variables_run,
    error_message_run,
    input_statistics_input_dataset,
    lineage,
    nominal_time_run,
    output_statistics_output_dataset,
    schema_dataset,
    sql_job,
)
from openlineage.client.serde import Serde

from lineage.api.app import create_app
from lineage.core.record import MAX_ATTRIBUTES_BYTES, canonical_json
from lineage.db.database import Database
from lineage.interop.openlineage import MAX_FACETS_BYTES
from lineage.services import auth
from lineage.settings import Settings
from tests.live_server import serve
from tests.test_openlineage import TENANT, by_uri, emit, lineage_client, raw_post, rows

MAX_BODY = 256 * 1024
DB = "postgres://db:5432"
CUSTOMERS, ORDERS, PAYMENTS = (DB, "raw.customers"), (DB, "raw.orders"), (DB, "raw.payments")
MART_CUSTOMERS, MART_REVENUE = (DB, "mart.customers"), (DB, "mart.revenue")


def uri(where: tuple[str, str]) -> str:
    return f"{where[0]}/{where[1]}"


@pytest.fixture
def server(database_url: str) -> Iterator[str]:
    settings = Settings(statement_timeout_ms=5000, auth="keys", max_body_bytes=MAX_BODY)
    with serve(create_app(settings, database_url=database_url)) as url:
        yield url


@pytest.fixture
async def key(database: Database, owner_database: Database) -> str:
    await auth.create_tenant(owner_database, TENANT)
    token, _ = await auth.create_key(database, TENANT, "ingest")
    return token


def source(where: tuple[str, str], field: str | None = None) -> lineage.LineageDatasetInput:
    return lineage.LineageDatasetInput(
        namespace=where[0], name=where[1], type="DATASET", field=field
    )


def entry(
    target: tuple[str, str], sources: list[tuple[str, str]] | None
) -> lineage.LineageDatasetEntry:
    inputs: list[lineage.LineageDatasetInput | lineage.LineageJobInput] | None = None
    if sources is not None:
        inputs = [source(where) for where in sources]
    return lineage.LineageDatasetEntry(
        namespace=target[0], name=target[1], type="DATASET", inputs=inputs
    )


def bulk_job(*entries: lineage.LineageDatasetEntry | lineage.LineageJobEntry, **facets: Any) -> Job:
    return Job(
        namespace="etl",
        name="bulk_copy",
        facets={"lineage": lineage.LineageJobFacet(entries=list(entries)), **facets},
    )


def a_run(
    job: Job,
    inputs: list[InputDataset | tuple[str, str]],
    outputs: list[OutputDataset | tuple[str, str]],
    run_facets: dict[str, Any] | None = None,
) -> list[RunEvent]:
    """START then COMPLETE, as an integration sends them."""
    run = Run(runId=str(uuid.uuid4()), facets=run_facets or {})
    return [
        RunEvent(
            eventType=state,
            eventTime=datetime.now(UTC).isoformat(),
            run=run,
            job=job,
            inputs=[i if isinstance(i, InputDataset) else InputDataset(*i) for i in inputs],
            outputs=[o if isinstance(o, OutputDataset) else OutputDataset(*o) for o in outputs],
        )
        for state in (RunState.START, RunState.COMPLETE)
    ]


async def parents_by_uri(owner: asyncpg.Connection) -> dict[str, set[str]]:
    """Each output's parents, as the source_uris of the records they are."""
    found = await rows(owner)
    uris = {row["context_id"]: row["source_uri"] for row in found}
    return {
        row["source_uri"]: {uris[parent] for parent in row["parent_ids"]}
        for row in found
        if row["transform"]
    }


async def test_the_lineage_facet_gives_each_output_only_the_inputs_it_names(
    server: str, key: str, owner: asyncpg.Connection
) -> None:
    job = bulk_job(entry(MART_CUSTOMERS, [CUSTOMERS]), entry(MART_REVENUE, [ORDERS, PAYMENTS]))
    events = a_run(job, [CUSTOMERS, ORDERS, PAYMENTS], [MART_CUSTOMERS, MART_REVENUE])
    await emit(lineage_client(server, key), *events)

    found = by_uri(await rows(owner))
    [customers], [orders], [payments] = (found[uri(w)] for w in (CUSTOMERS, ORDERS, PAYMENTS))
    [mart_customers], [mart_revenue] = found[uri(MART_CUSTOMERS)], found[uri(MART_REVENUE)]
    assert mart_customers["parent_ids"] == [customers["context_id"]]
    assert mart_revenue["parent_ids"] == [orders["context_id"], payments["context_id"]]
    # Each output keeps the job's lineage facet narrowed to its own entries.
    sent = Serde.to_dict(events[1])["job"]["facets"]["lineage"]
    kept = mart_customers["attributes"]["openlineage_facets"]["job"]["lineage"]
    assert kept == sent | {"entries": sent["entries"][:1]}

    await emit(lineage_client(server, key), *events)
    assert len(await rows(owner)) == 5


async def test_what_the_lineage_facet_says_beyond_entity_inputs(
    server: str, key: str, owner: asyncpg.Connection
) -> None:
    ledger, mart_ledger, mart_empty, mart_unsaid = (
        (DB, "raw.ledger"),
        (DB, "mart.ledger"),
        (DB, "mart.empty"),
        (DB, "mart.unsaid"),
    )
    by_field = entry(MART_CUSTOMERS, None)
    by_field.fields = {
        "customer_id": lineage.LineageFieldEntry(inputs=[source(CUSTOMERS, "id")]),
        "total": lineage.LineageFieldEntry(
            inputs=[source(PAYMENTS, "amount"), lineage.LineageJobInput(type="JOB")]
        ),
    }
    from_a_job = entry(MART_REVENUE, [ORDERS])
    assert from_a_job.inputs is not None
    from_a_job.inputs.append(lineage.LineageJobInput(type="JOB", namespace="etl", name="fx"))
    job = bulk_job(
        by_field,
        from_a_job,
        entry(mart_empty, []),  # says it comes from no tracked dataset
        entry(mart_ledger, [ledger]),  # neither listed among the event's datasets
        lineage.LineageJobEntry(type="JOB", namespace="etl", name="audit", inputs=[source(ORDERS)]),
    )
    events = a_run(
        job, [CUSTOMERS, ORDERS, PAYMENTS], [MART_CUSTOMERS, MART_REVENUE, mart_empty, mart_unsaid]
    )
    await emit(lineage_client(server, key), *events)

    assert await parents_by_uri(owner) == {
        uri(MART_CUSTOMERS): {uri(CUSTOMERS), uri(PAYMENTS)},
        uri(MART_REVENUE): {uri(ORDERS)},
        uri(mart_empty): set(),
        uri(mart_unsaid): set(),  # no entry describes it: the job made it from nothing tracked
        uri(mart_ledger): {uri(ledger)},
    }
    answer = await asyncio.to_thread(
        raw_post, server, key, json.dumps(Serde.to_dict(events[1])).encode()
    )
    assert set(answer.json()["inputs"]) == {uri(w) for w in (CUSTOMERS, ORDERS, PAYMENTS, ledger)}
    assert uri(mart_ledger) in answer.json()["outputs"]
    found = by_uri(await rows(owner))
    # The job-to-job entry makes no edge; it stays with every output's narrowed facet.
    [unsaid] = found[uri(mart_unsaid)]
    entries = unsaid["attributes"]["openlineage_facets"]["job"]["lineage"]["entries"]
    assert [e["type"] for e in entries] == ["JOB"]


async def test_column_lineage_names_the_inputs_when_no_lineage_facet_does(
    server: str, key: str, owner: asyncpg.Connection
) -> None:
    column_lineage = column_lineage_dataset.ColumnLineageDatasetFacet(
        fields={
            "id": column_lineage_dataset.Fields(
                inputFields=[column_lineage_dataset.InputField(DB, "raw.customers", "id")]
            )
        },
        dataset=[column_lineage_dataset.InputField(DB, "raw.orders", "status")],
    )
    job = Job(namespace="etl", name="marts")
    described = OutputDataset(*MART_CUSTOMERS, facets={"columnLineage": column_lineage})
    await emit(
        lineage_client(server, key),
        *a_run(job, [CUSTOMERS, ORDERS, PAYMENTS], [described, MART_REVENUE]),
    )
    assert await parents_by_uri(owner) == {
        uri(MART_CUSTOMERS): {uri(CUSTOMERS), uri(ORDERS)},
        uri(MART_REVENUE): {uri(CUSTOMERS), uri(ORDERS), uri(PAYMENTS)},  # no facet: every input
    }


async def test_the_lineage_facet_wins_over_column_lineage(
    server: str, key: str, owner: asyncpg.Connection
) -> None:
    column_lineage = column_lineage_dataset.ColumnLineageDatasetFacet(
        fields={
            "id": column_lineage_dataset.Fields(
                inputFields=[column_lineage_dataset.InputField(DB, "raw.orders", "id")]
            )
        }
    )
    described = OutputDataset(*MART_CUSTOMERS, facets={"columnLineage": column_lineage})
    job = bulk_job(entry(MART_CUSTOMERS, [CUSTOMERS]))
    await emit(lineage_client(server, key), *a_run(job, [CUSTOMERS, ORDERS], [described]))
    assert await parents_by_uri(owner) == {uri(MART_CUSTOMERS): {uri(CUSTOMERS)}}


async def test_a_lineage_facet_on_an_output_names_its_inputs(
    server: str, key: str, owner: asyncpg.Connection
) -> None:
    facet = lineage.LineageDatasetFacet(inputs=[source(ORDERS)])
    described = OutputDataset(*MART_REVENUE, facets={"lineage": facet})
    job = Job(namespace="etl", name="revenue")
    await emit(
        lineage_client(server, key),
        *a_run(job, [CUSTOMERS, ORDERS], [described, MART_CUSTOMERS]),
    )
    assert await parents_by_uri(owner) == {
        uri(MART_REVENUE): {uri(ORDERS)},
        uri(MART_CUSTOMERS): set(),  # the event has a lineage facet, and none describes it
    }


async def test_facets_are_kept_as_attributes_except_private_ones(
    server: str, key: str, owner: asyncpg.Connection
) -> None:
    schema = schema_dataset.SchemaDatasetFacet(
        fields=[schema_dataset.SchemaDatasetFacetFields(name="id", type="BIGINT")]
    )
    read = InputDataset(
        *CUSTOMERS,
        facets={"schema": schema},
        inputFacets={
            "inputStatistics": input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
                rowCount=3
            )
        },
    )
    written = OutputDataset(
        *MART_CUSTOMERS,
        facets={"schema": schema},
        outputFacets={
            "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=2, size=2**60
            )
        },
    )
    job = bulk_job(
        entry(MART_CUSTOMERS, [CUSTOMERS]),
        documentation=documentation_job.DocumentationJobFacet(description="Customer mart"),
        sql=sql_job.SQLJobFacet(query="SELECT * FROM raw.customers WHERE email = 'jane@x.org'"),
    )
    run_facets = {
        "nominalTime": nominal_time_run.NominalTimeRunFacet(nominalStartTime="2026-09-01T00:00Z"),
        "environmentVariables": environment_variables_run.EnvironmentVariablesRunFacet(
            environmentVariables=[
                environment_variables_run.EnvironmentVariable(name="DB_PASSWORD", value="hunter2")
            ]
        ),
    }
    events = a_run(job, [read], [written], run_facets)
    await emit(lineage_client(server, key), *events)

    sent = Serde.to_dict(events[1])
    found = by_uri(await rows(owner))
    [customers], [mart] = found[uri(CUSTOMERS)], found[uri(MART_CUSTOMERS)]
    assert customers["attributes"]["openlineage_facets"] == {
        "dataset": sent["inputs"][0]["facets"],
        "input": sent["inputs"][0]["inputFacets"],
    }
    job_facets = sent["job"]["facets"]
    kept = mart["attributes"]["openlineage_facets"]
    assert kept == {
        "dataset": sent["outputs"][0]["facets"],
        "job": {name: job_facets[name] for name in ("documentation", "lineage")},
        "run": kept["run"],
        # Text that may quote data or secrets, and a number past 2**53 that jsonb would alter.
        "omitted": ["job.sql", "output.outputStatistics", "run.environmentVariables"],
    }
    # The client adds a tags facet of its own as it sends.
    assert kept["run"]["nominalTime"] == sent["run"]["facets"]["nominalTime"]
    assert set(kept["run"]) == {"nominalTime", "tags"}
    stored = await owner.fetchval(
        "SELECT attributes::text FROM provenance WHERE tenant_id = $1 AND "
        "attributes::text LIKE ANY ($2)",
        TENANT,
        ["%jane@x.org%", "%hunter2%"],
    )
    assert stored is None


@pytest.mark.parametrize("state", [RunState.FAIL, RunState.ABORT])
async def test_a_failed_run_keeps_its_job_and_run_facets_but_not_its_error(
    server: str, key: str, owner: asyncpg.Connection, state: RunState
) -> None:
    job = Job(
        namespace="etl",
        name="load",
        facets={"documentation": documentation_job.DocumentationJobFacet(description="Loads")},
    )
    error = error_message_run.ErrorMessageRunFacet(
        message="duplicate key: jane@x.org", programmingLanguage="python"
    )
    [_, complete] = a_run(job, [CUSTOMERS], [MART_CUSTOMERS], {"errorMessage": error})
    failed = RunEvent(
        eventType=state,
        eventTime=complete.eventTime,
        run=complete.run,
        job=job,
        inputs=complete.inputs,
        outputs=[],
    )
    await emit(lineage_client(server, key), failed)

    [run] = [row for row in await rows(owner) if row["kind"] == "tool_call"]
    kept = run["attributes"]["openlineage_facets"]
    assert kept == {
        "job": Serde.to_dict(failed)["job"]["facets"],
        "run": {"tags": kept["run"]["tags"]},  # the client's own
        "omitted": ["run.errorMessage"],
    }


async def test_a_later_event_of_the_run_keeps_the_records_the_first_made(
    server: str, key: str, owner: asyncpg.Connection
) -> None:
    """START, COMPLETE and a second COMPLETE each give other facets for the same datasets:
    nothing is refused, and each record keeps the facets of the event that made it."""

    def statistics(rows: int) -> dict[str, Any]:
        return {
            "inputStatistics": input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
                rowCount=rows
            )
        }

    job = bulk_job(entry(MART_CUSTOMERS, [CUSTOMERS]))
    start, complete = a_run(job, [InputDataset(*CUSTOMERS, inputFacets=statistics(1))], [])
    complete.inputs = [InputDataset(*CUSTOMERS, inputFacets=statistics(2))]
    complete.outputs = [customers_mart_of(rows=5)]
    again = RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=complete.eventTime,
        run=complete.run,
        job=job,
        inputs=[InputDataset(*CUSTOMERS, inputFacets=statistics(3))],
        outputs=[customers_mart_of(rows=6)],
    )
    await emit(lineage_client(server, key), start, complete, again)

    found = by_uri(await rows(owner))
    [customers], [mart] = found[uri(CUSTOMERS)], found[uri(MART_CUSTOMERS)]
    assert (
        customers["attributes"]["openlineage_facets"]["input"]["inputStatistics"]["rowCount"] == 1
    )
    assert mart["parent_ids"] == [customers["context_id"]]
    written = mart["attributes"]["openlineage_facets"]["output"]["outputStatistics"]
    assert written["rowCount"] == 5


def customers_mart_of(rows: int) -> OutputDataset:
    facet = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(rowCount=rows)
    return OutputDataset(*MART_CUSTOMERS, outputFacets={"outputStatistics": facet})


async def test_facets_are_kept_within_a_bound(
    server: str, key: str, owner: asyncpg.Connection
) -> None:
    wide = schema_dataset.SchemaDatasetFacet(
        fields=[
            schema_dataset.SchemaDatasetFacetFields(name=f"column_{i:04}", type="VARCHAR")
            for i in range(400)
        ]
    )
    deep: Any = "bottom"
    for _ in range(70):
        deep = {"nested": deep}
    small: dict[str, Any] = {
        f"tag{i:02}": {"_producer": "https://example.invalid", "value": "x" * 200}
        for i in range(60)
    }
    written = OutputDataset(*MART_CUSTOMERS, facets={"schema": wide, "deep": deep, **small})
    await emit(
        lineage_client(server, key),
        *a_run(Job(namespace="etl", name="wide"), [CUSTOMERS], [written]),
    )

    [mart] = by_uri(await rows(owner))[uri(MART_CUSTOMERS)]
    facets = mart["attributes"]["openlineage_facets"]
    assert len(canonical_json(mart["attributes"])) <= MAX_ATTRIBUTES_BYTES
    assert MAX_FACETS_BYTES // 2 < len(canonical_json(facets["dataset"])) <= MAX_FACETS_BYTES
    # Smallest first: the wide schema and the too-deep facet give way, the small ones fit.
    assert "dataset.schema" in facets["omitted"] and "dataset.deep" in facets["omitted"]
    omitted = {n.removeprefix("dataset.") for n in facets["omitted"] if n.startswith("dataset.")}
    assert set(facets["dataset"]) | omitted == {"schema", "deep", *small}
    kept = sorted(facets["dataset"])
    assert kept and kept == sorted(small)[: len(kept)]


async def test_a_malformed_lineage_facet_is_refused_naming_where(
    server: str, key: str, owner: asyncpg.Connection
) -> None:
    [_, complete] = a_run(bulk_job(entry(MART_CUSTOMERS, [CUSTOMERS])), [CUSTOMERS], [])
    event = Serde.to_dict(complete)
    del event["job"]["facets"]["lineage"]["entries"][0]["inputs"][0]["namespace"]
    answer = await asyncio.to_thread(raw_post, server, key, json.dumps(event).encode())
    assert answer.status_code == 422, answer.text
    assert answer.json()["rule"] == "openlineage_bad_event"
    assert "job.facets.lineage.entries.0.DATASET.inputs.0.DATASET.namespace" in answer.text
    event["job"]["facets"]["lineage"] = {"inputs": []}  # a dataset facet where a job facet goes
    answer = await asyncio.to_thread(raw_post, server, key, json.dumps(event).encode())
    assert answer.status_code == 422 and "job.facets.lineage.entries" in answer.text
    assert await rows(owner) == []
