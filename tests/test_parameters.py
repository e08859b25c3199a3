"""A parameter is honoured or refused, never ignored; a limit is enforced where it is stored.

Every route of the API schema refuses a query parameter it does not take (422 naming it and
what the route takes); GET /v1/contexts honours session_id; POST /v1/spans refuses spans that
would take a trace past max_spans_per_trace, storing nothing of the request."""

import re

import asyncpg
import httpx
import pytest

from lineage.api.app import create_app
from lineage.services.sessions import record_tool_call
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore

MAX_SPANS_PER_TRACE = 3
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture
def settings() -> Settings:
    return Settings(statement_timeout_ms=5000, auth="none", max_spans_per_trace=MAX_SPANS_PER_TRACE)


def schema_routes() -> list[tuple[str, str]]:
    app = create_app(Settings(auth="none"), database_url="postgresql://unused")
    paths = app.openapi()["paths"]
    return sorted((method.upper(), path) for path, item in paths.items() for method in item)


async def test_every_route_refuses_a_query_parameter_it_does_not_take(
    client: httpx.AsyncClient,
) -> None:
    routes = schema_routes()
    assert len(routes) > 30, "the schema lost its routes"
    answers = {}
    for method, path in routes:
        target = re.sub(r"\{[^}]+\}", "x", path)
        answer = await client.request(method, target, params={"no_such_filter": "1"})
        answers[f"{method} {path}"] = (answer.status_code, answer.json().get("detail", ""))
    ignored = {
        route: answer
        for route, answer in answers.items()
        if answer[0] != 422 or "unknown query parameter no_such_filter" not in answer[1]
    }
    assert ignored == {}


async def test_listing_contexts_names_what_it_takes_and_honours_session_id(
    client: httpx.AsyncClient, store: PostgresStore
) -> None:
    mine = await record_tool_call(store, "session_a", "search", "found a")
    await record_tool_call(store, "session_b", "search", "found b")
    refused = await client.get("/v1/contexts", params={"sesion_id": "session_a"})
    assert refused.status_code == 422
    assert "session_id" in refused.json()["detail"]  # the list of what it takes
    listed = await client.get("/v1/contexts", params={"session_id": "session_a"})
    assert listed.status_code == 200, listed.text
    assert [r["context_id"] for r in listed.json()["records"]] == [mine.context_id]


def span(span_id: int) -> dict[str, object]:
    return {
        "trace_id": TRACE,
        "span_id": f"{span_id:016x}",
        "name": "step",
        "start_time_unix_nano": 1,
        "end_time_unix_nano": 2,
    }


async def test_spans_past_the_per_trace_limit_are_refused_and_nothing_is_stored(
    client: httpx.AsyncClient, owner: asyncpg.Connection
) -> None:
    first = await client.post("/v1/spans", json={"spans": [span(1), span(2)]})
    assert first.json() == {"received": 2, "stored": 2}
    past = await client.post("/v1/spans", json={"spans": [span(3), span(4)]})
    assert past.status_code == 422, past.text
    assert past.json()["rule"] == "trace_too_large"
    assert str(MAX_SPANS_PER_TRACE) in past.json()["detail"]
    stored = await owner.fetchval("SELECT count(*) FROM spans WHERE trace_id = $1", TRACE)
    assert stored == 2  # not one of the refused request's spans
    replay = await client.post("/v1/spans", json={"spans": [span(1), span(2), span(3)]})
    assert replay.json() == {"received": 3, "stored": 1}  # a replay counts once: 3 in all
