"""Trace ids as people have them: W3C ids and other safe ids, the request's trace id header on
records posted without one, and the trace id on error bodies and CLI runs."""

import asyncio

import httpx
import pytest
from typer.testing import CliRunner

from lineage import cli
from lineage.core.errors import BadParameter
from lineage.core.telemetry import outgoing_headers, trace_context, trace_id_from_headers

W3C = "4bf92f3577b34da6a3ce929d0e0e4736"


def document(name: str, **fields: object) -> dict[str, object]:
    return {"kind": "document", "source_uri": f"s3://{name}", "text": name, **fields}


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        (W3C, W3C),
        (W3C.upper(), W3C),  # a W3C id is stored in lowercase
        ("abc123def456", "abc123def456"),
        ("req-2026.12.01:42_a", "req-2026.12.01:42_a"),
        ("has space", None),
        ("-leading-dash", None),
        ("a/b", None),
        ("0" * 32, None),
        ("x" * 129, None),
        ("", None),
    ],
)
def test_the_x_trace_id_header_takes_w3c_and_other_safe_ids(sent: str, kept: str | None) -> None:
    assert trace_id_from_headers({"x-trace-id": sent}) == kept


def test_a_safe_non_w3c_id_opens_a_trace_and_travels_as_x_trace_id_only() -> None:
    with trace_context("abc123def456") as trace_id:
        assert trace_id == "abc123def456"
        assert outgoing_headers() == {"X-Trace-Id": "abc123def456"}
    with pytest.raises(BadParameter, match=r"letters, digits and _\.:-"), trace_context("a b"):
        pass


async def test_records_posted_without_a_trace_id_take_the_headers(
    client: httpx.AsyncClient,
) -> None:
    one = await client.post("/v1/contexts", json=document("a"), headers={"X-Trace-Id": "abc123"})
    assert one.status_code == 201, one.text
    assert one.json()["trace_id"] == "abc123"
    own = await client.post(
        "/v1/contexts", json=document("b", trace_id="mine-1"), headers={"X-Trace-Id": "abc123"}
    )
    assert own.json()["trace_id"] == "mine-1"  # the record's own id wins
    parent = f"00-{W3C}-00f067aa0ba902b7-01"
    batch = await client.post(
        "/v1/contexts/batch",
        json={"records": [document("c"), document("d", trace_id="mine-2")]},
        headers={"traceparent": parent, "X-Trace-Id": "abc123"},  # traceparent first
    )
    assert [r["record"]["trace_id"] for r in batch.json()["results"]] == [W3C, "mine-2"]
    untraced = await client.post("/v1/contexts", json=document("e"))
    assert untraced.json()["trace_id"] is None  # nothing sent, nothing invented
    trace = await client.get("/v1/traces/abc123")
    assert trace.status_code == 200
    assert [r["source_uri"] for r in trace.json()["records"]] == ["s3://a"]


async def test_a_record_with_an_unsafe_trace_id_is_refused_naming_the_rule(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/v1/contexts", json=document("a", trace_id="a b\n"))
    assert response.status_code == 422
    assert response.json()["rule"] == "malformed_trace_id"
    assert (await client.get("/v1/contexts")).json()["records"] == []


async def test_error_bodies_carry_the_requests_trace_id(client: httpx.AsyncClient) -> None:
    missing = await client.get("/v1/contexts/nope", headers={"X-Trace-Id": "abc123def456"})
    assert missing.status_code == 404
    assert missing.json()["trace_id"] == "abc123def456"
    bad = await client.post("/v1/contexts", json={"kind": "document"})
    assert bad.status_code == 422
    assert bad.json()["trace_id"] == bad.headers["X-Trace-Id"]  # a new one when none was sent


async def test_a_cli_run_names_its_trace_id_on_its_error_line(database_url: str) -> None:
    result = await asyncio.to_thread(
        CliRunner().invoke,
        cli.app,
        ["walk", "no_such_record"],
        env={"LINEAGE_DATABASE_URL": database_url},
    )
    assert result.exit_code == 1
    assert "error:" in result.output
    assert "trace_id " in result.output
