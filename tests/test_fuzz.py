"""A bounded fuzz pass: schemathesis generates requests from the service's own OpenAPI schema
against a real uvicorn server with the demo incident loaded. No response may be a 5xx, and every
response must be documented: its status, its media type (problem+json for errors) and its body
against the route's response model."""

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import APIOperation, Case
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from bench.server import Server, serving
from lineage.services.demo import load_incident
from lineage.store.postgres import PostgresStore
from tests.conftest import database_at

# Starts servers or browsers of its own: outside the fast tier.
pytestmark = pytest.mark.slow

EXAMPLES_PER_OPERATION = 8
# The live event stream never ends by itself; it has its own tests.
SKIPPED = {("GET", "/v1/events")}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture
def server(database_url: str) -> Iterator[Server]:
    async def demo() -> None:
        async with database_at(database_url) as database:
            await load_incident(PostgresStore(database))

    asyncio.run(demo())
    env = {"LINEAGE_AUTH": "none", "LINEAGE_LOG_INTERVAL_S": "0", "LINEAGE_LOG_LEVEL": "error"}
    with serving(database_url, env) as running:
        yield running


def operations(server: Server) -> list[APIOperation[Any, Any, Any, Any]]:
    """Every operation of the served schema but the skipped ones; the schema must be valid."""
    schema = schemathesis.openapi.from_url(f"{server.base_url}/openapi.json")
    found = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operation = result.ok()
        if (operation.method.upper(), operation.path) not in SKIPPED:
            found.append(operation)
    assert len(found) > 20, "the schema lost its operations"
    return found


def test_generated_requests_get_no_5xx_and_responses_match_the_schema(server: Server) -> None:
    failures: list[str] = []
    for operation in operations(server):

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def exercise(case: Case[Any]) -> None:
            response = case.call(base_url=server.base_url, timeout=30)
            try:
                case.validate_response(response, checks=CHECKS)
            except FailureGroup as failure:
                failures.append(f"{case.method} {case.formatted_path}: {failure}"[:2000])

        exercise()
    assert not failures, "\n\n".join(failures[:10])


def with_nul(value: Any) -> Any:
    """The same value with a NUL inside every string (PostgreSQL cannot store one)."""
    if isinstance(value, str):
        return value + "\x00"
    if isinstance(value, dict):
        return {key: with_nul(item) for key, item in value.items()}
    if isinstance(value, list):
        return [with_nul(item) for item in value]
    return value


def test_a_nul_in_any_parameter_is_refused_not_a_5xx(server: Server) -> None:
    statuses: dict[str, int] = {}
    for operation in operations(server):

        @settings(max_examples=1, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(case=operation.as_strategy())
        def probe(case: Case[Any]) -> None:
            case.path_parameters = with_nul(case.path_parameters)
            case.query = with_nul(case.query)
            if isinstance(case.body, dict | list):
                case.body = with_nul(case.body)
            response = case.call(base_url=server.base_url, timeout=30)
            statuses[f"{case.method} {case.path}"] = response.status_code

        probe()
    assert {k: v for k, v in statuses.items() if v >= 500} == {}


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


LONE = "\ud800"
DOCUMENT = {"kind": "document", "source_uri": "s3://fuzz.md", "text": "t"}
SPAN = {
    "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
    "span_id": "00f067aa0ba902b7",
    "name": "s",
    "start_time_unix_nano": 10**30,
    "end_time_unix_nano": 10**30,
}
# Shapes that once answered 500 (or 200 and then died): each must be a 4xx that names its rule.
BAD_SHAPES: list[tuple[str, str, Any]] = [
    ("POST", "/v1/contexts", {**DOCUMENT, "text": LONE}),
    ("POST", "/v1/contexts", {**DOCUMENT, "source_uri": "s3://" + LONE}),
    ("POST", "/v1/contexts", {**DOCUMENT, "produced_by": LONE}),
    ("POST", "/v1/contexts/batch", {"records": [{**DOCUMENT, "transform": LONE}]}),
    ("POST", "/v1/contexts", {**DOCUMENT, "attributes": nested(500)}),
    ("GET", "/v1/contexts?since=0001-01-01T00:00:00%2B05:00", None),
    ("GET", "/v1/contexts?until=9999-12-31T23:59:59-05:00", None),
    ("POST", "/v1/spans", {"spans": [SPAN]}),
    ("GET", "/v1/reports/claims?bucket=0%20day", None),
    ("GET", "/v1/events?after=" + "9" * 40, None),
    ("GET", "/v1/log/proof/consistency?first=99999999999999999999&second=1", None),
]


def test_crafted_bad_input_gets_a_4xx_naming_the_rule_and_writes_nothing(
    server: Server, database_url: str
) -> None:
    async def count() -> int:
        owner = await asyncpg.connect(database_url)
        try:
            found: int = await owner.fetchval("SELECT count(*) FROM provenance")
        finally:
            await owner.close()
        return found

    before = asyncio.run(count())
    answers = {}
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        for method, path, body in BAD_SHAPES:
            content = None if body is None else json.dumps(body).encode()  # \ud800 escaped
            with http.stream(
                method, path, content=content, headers={"content-type": "application/json"}
            ) as answer:
                answer.read()  # a stream that dies midway raises here
                is_problem = answer.headers.get("content-type") == "application/problem+json"
                problem = answer.json() if is_problem else {}
                answers[f"{method} {path[:60]}"] = (answer.status_code, problem.get("detail"))
    wrong = {shape: got for shape, got in answers.items() if not (400 <= got[0] < 500 and got[1])}
    assert wrong == {}
    assert asyncio.run(count()) == before


def string_leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every string in a JSON value."""
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from string_leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from string_leaves(item, (*path, index))


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    if isinstance(value, dict):
        return {key: replaced(item, tuple(rest), new) if key == head else item
                for key, item in value.items()}  # fmt: skip
    return [replaced(item, tuple(rest), new) if i == head else item for i, item in enumerate(value)]


OPENLINEAGE_RUN = {
    "eventType": "COMPLETE",
    "eventTime": "2026-01-01T00:00:00Z",
    "run": {"runId": "0b6f2c36-7d63-4c6e-9d4e-6a4f3f1f0d2a"},
    "job": {"namespace": "etl", "name": "load"},
    "inputs": [{"namespace": "s3://in", "name": "a"}],
    "outputs": [{"namespace": "s3://out", "name": "b"}],
    "producer": "https://example.invalid",
    "schemaURL": "https://example.invalid",
}
OTLP_SPAN = {
    "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
    "spanId": "00f067aa0ba902b7",
    "name": "retrieve",
    "startTimeUnixNano": "1700000000000000000",
    "endTimeUnixNano": "1700000000500000000",
    "attributes": [{"key": "openinference.span.kind", "value": {"stringValue": "RETRIEVER"}}],
}


def otlp(span: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [span]}]}]}


def crafted_query_shapes(server: Server) -> list[tuple[str, str, Any]]:
    """For every GET route, each query parameter with a value past its range: integers of 40
    digits, dates within hours of year 1 and 9999 once in UTC, buckets of zero."""
    spec = httpx.get(f"{server.base_url}/openapi.json", timeout=30).json()
    shapes: list[tuple[str, str, Any]] = []
    for path, operations in spec["paths"].items():
        if "get" not in operations or path == "/v1/events":
            continue
        route = path.replace("{context_id}", "answer_1").replace("{answer_id}", "answer_1")
        route = route.replace("{trace_id}", "4bf92f3577b34da6a3ce929d0e0e4736")
        route = route.replace("{request_id}", "req").replace("{key_id}", "k")
        for parameter in operations["get"].get("parameters", []):
            if parameter["in"] != "query":
                continue
            schema = parameter.get("schema", {})
            kinds = [schema, *schema.get("anyOf", [])]
            values = []
            if any(kind.get("type") == "integer" for kind in kinds):
                values.append("9" * 40)
            if any(kind.get("format") == "date-time" for kind in kinds):
                values += ["0001-01-01T00:00:00%2B05:00", "9999-12-31T23:59:59-05:00"]
            if parameter["name"] == "bucket":
                values += ["0%20day", "-1%20day"]
            shapes += [("GET", f"{route}?{parameter['name']}={value}", None) for value in values]
    return shapes


def crafted_body_shapes(server: Server) -> list[tuple[str, str, Any]]:
    """For every route that takes a JSON body, one sound body (generated from the schema, and
    hand-made for OpenLineage and OTLP) with a lone surrogate in each string in turn, and one
    with JSON nested 500 deep in place of each object."""
    bases: list[tuple[str, str, Any]] = [
        ("POST", "/api/v1/lineage", OPENLINEAGE_RUN),
        ("POST", "/v1/traces", otlp(OTLP_SPAN)),
        ("POST", "/v1/contexts", DOCUMENT),
        ("POST", "/v1/contexts", {**DOCUMENT, "kind": "chunk", "parent_ids": ["doc_contractors_v1"],
                                  "transform": "chunker", "transform_version": "1.0",
                                  "index_snapshot": "idx", "trace_id": SPAN["trace_id"],
                                  "attributes": {"note": "n", "list": ["a"]}}),
        ("POST", "/v1/answers", {"prompt_id": "answer_1", "output": {"text": "Yes [chunk_42]."},
                                 "produced_by": "agent/p@v1", "model": "m"}),
        ("POST", "/v1/queries", {"request_id": "req-fuzz", "query": "q?", "model": "m",
                                 "routing": {"decision": "hybrid"}, "backends": ["bm25"],
                                 "evidence": [{"context_id": "chunk_42", "backend": "bm25"}],
                                 "answer": "a", "produced_by": "agent/p@v1"}),
        ("POST", "/v1/contexts/answer_1/verify", {"premise_texts": {"chunk_42": "text"}}),
        ("POST", "/v1/answers/answer_1/verify", {"premise_texts": {"chunk_42": "text"}}),
        ("POST", "/v1/spans", {"spans": [{**SPAN, "start_time_unix_nano": 1,
                                          "end_time_unix_nano": 2, "attributes": {"k": "v"}}]}),
        ("POST", "/v1/keys", {"scope": "read", "label": "fuzz"}),
    ]  # fmt: skip
    for operation in operations(server):
        if operation.method.upper() == "GET" or operation.path in {"/v1/forget", "/v1/session"}:
            continue

        @settings(max_examples=1, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(case=operation.as_strategy())
        def take(case: Case[Any]) -> None:
            if isinstance(case.body, dict):
                path = case.formatted_path.replace("%7B", "{")
                bases.append((case.method.upper(), path, case.body))

        take()
    shapes: list[tuple[str, str, Any]] = []
    for method, path, body in bases:
        for leaf in string_leaves(body):
            text = body
            for step in leaf:
                text = text[step]
            shapes.append((method, path, replaced(body, leaf, text + LONE)))
        shapes.append((method, path, nested(500)))
    shapes.append(("POST", "/v1/traces", otlp({**OTLP_SPAN, "startTimeUnixNano": str(10**30)})))
    return shapes


def test_every_field_and_parameter_refuses_what_it_cannot_hold_with_a_4xx_and_writes_nothing(
    server: Server, database_url: str
) -> None:
    async def count() -> int:
        owner = await asyncpg.connect(database_url)
        try:
            found: int = await owner.fetchval(
                "SELECT (SELECT count(*) FROM provenance) + (SELECT count(*) FROM spans)"
            )
        finally:
            await owner.close()
        return found

    before = asyncio.run(count())
    shapes = [
        *crafted_query_shapes(server),
        *crafted_body_shapes(server),
        ("GET", "/v1/events?after=" + "9" * 40, None),
    ]
    assert len(shapes) > 50
    wrong = {}
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        for method, path, body in shapes:
            content = None if body is None else json.dumps(body).encode()  # \ud800 escaped
            with http.stream(
                method, path, content=content, headers={"content-type": "application/json"}
            ) as answer:
                answer.read()  # a stream that dies midway raises here
                is_problem = answer.headers.get("content-type") == "application/problem+json"
                detail = answer.json().get("detail") if is_problem else None
            if not (400 <= answer.status_code < 500 and detail):
                wrong[f"{method} {path[:70]} {content[-300:] if content else b''!r}"] = (
                    answer.status_code, detail or answer.text[:200]
                )  # fmt: skip
    assert wrong == {}
    assert asyncio.run(count()) == before
