"""The full records of a blast radius by source: the NDJSON stream holds the records
sql/blast_radius_by_source.sql lists, in its order, and the file reads each record by primary
key in the ids' order, whatever the statistics."""

import json
from typing import Any

import asyncpg
import httpx
import pytest

from lineage import db
from lineage.api import results
from lineage.api.app import create_app
from lineage.core import record
from lineage.core.derive import Derivation, derive_many
from lineage.core.record import MAX_ATTRIBUTES_DEPTH
from lineage.services import reads, walks
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests import live_server
from tests.walks_helpers import (
    NDJSON,
    OPEN_TRANSACTIONS,
    explain_as_app,
    fan,
    ndjson_lines,
    seq_scans_of_the_records,
)


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


# As deep as a record's attributes may nest.
ODD = {
    "name": "café ☕",
    "nested": {
        "list": [1, 2.5, None, True],
        "quote": 'a "b" \\ c\n',
        "deep": _nested(MAX_ATTRIBUTES_DEPTH - 2),
    },
}


async def the_sql_file(pool: asyncpg.Pool, **values: Any) -> list[dict[str, Any]]:
    async with db.transaction(pool, "default") as connection:
        rows = await db.fetch(connection, "blast_radius_by_source", tenant_id="default", **values)
    return [reads.node_from_row(row) for row in rows]


@pytest.mark.parametrize(("kind", "max_depth"), [("any", 20), ("answer", 20), ("all", 1)])
async def test_the_stream_is_the_records_of_the_sql_file_in_its_order(
    store: PostgresStore,
    pool: asyncpg.Pool,
    client: httpx.AsyncClient,
    kind: str,
    max_depth: int,
) -> None:
    odd = Derivation(["fan_chunk_0"], "odd", "summary", context_id="fan_odd", attributes=ODD)
    await derive_many(store, [*fan(), odd])
    values: dict[str, str | int] = {
        "source_uri": "s3://big.md",
        "kind": kind,
        "max_depth": max_depth,
    }
    expected = await the_sql_file(pool, **values)
    assert len(expected) >= 500
    assert any(node["attributes"] == ODD for node in expected) == (kind == "any")

    response = await client.get("/v1/impact", params=values, headers={"Accept": NDJSON})
    assert response.status_code == 200, response.text
    streamed, summary = ndjson_lines(response.text)
    assert streamed == expected
    assert summary["total"] == len(expected)
    assert summary["truncated"] == (max_depth == 1)
    counts: dict[str, int] = {}
    for node in expected:
        counts[node["kind"]] = counts.get(node["kind"], 0) + 1
    assert summary["counts_by_kind"] == dict(sorted(counts.items()))


async def test_odd_attributes_come_back_whole_in_every_json_answer(
    store: PostgresStore, client: httpx.AsyncClient
) -> None:
    """The record, its walk-back and a radius give the attributes back as they were stored."""
    document = Derivation([], "odd doc", "document", source_uri="s3://odd.md", context_id="o_doc")
    odd = Derivation(["o_doc"], "odd", "summary", context_id="o_sum", attributes=ODD)
    plain = Derivation(["o_doc"], "plain", "summary", context_id="o_plain", attributes={"a": "é"})
    await derive_many(store, [document, odd, plain])
    for context_id, attributes in (("o_sum", ODD), ("o_plain", {"a": "é"})):
        record = await client.get(f"/v1/contexts/{context_id}")
        assert record.status_code == 200, record.text
        assert record.json()["attributes"] == attributes
        walk = await client.get(f"/v1/contexts/{context_id}/lineage")
        assert walk.status_code == 200, walk.text
        nodes = {node["context_id"]: node for node in walk.json()["nodes"]}
        assert nodes[context_id]["attributes"] == attributes
    radius = await client.get("/v1/impact", params={"source_uri": "s3://odd.md", "kind": "all"})
    assert radius.status_code == 200, radius.text
    by_id = {node["context_id"]: node for node in radius.json()["nodes"]}
    assert by_id["o_sum"]["attributes"] == ODD and by_id["o_plain"]["attributes"] == {"a": "é"}


async def test_a_record_stored_deeper_than_the_rule_allows_still_reads(
    store: PostgresStore, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records stored before attributes were held to MAX_ATTRIBUTES_DEPTH may nest past the 255
    levels orjson and pydantic write: the record, its walk-back and its radius still read."""
    deep = {"deep": _nested(300)}
    monkeypatch.setattr(record, "MAX_ATTRIBUTES_DEPTH", 400)  # the rule as it was
    await derive_many(
        store,
        [
            Derivation([], "d", "document", source_uri="s3://deep.md", context_id="deep_doc"),
            Derivation(["deep_doc"], "s", "summary", context_id="deep_sum", attributes=deep),
        ],
    )
    read = await client.get("/v1/contexts/deep_sum")
    assert read.status_code == 200, read.text
    assert read.json()["attributes"] == deep
    walk = await client.get("/v1/contexts/deep_sum/lineage")
    assert walk.status_code == 200, walk.text
    assert walk.json()["nodes"][0]["attributes"] == deep
    radius = await client.get(
        "/v1/impact", params={"source_uri": "s3://deep.md"}, headers={"Accept": NDJSON}
    )
    streamed, _ = ndjson_lines(radius.text)
    assert {node["context_id"]: node["attributes"] for node in streamed}["deep_sum"] == deep


def test_what_orjson_refuses_json_writes() -> None:
    """Records stored before attributes were held to MAX_ATTRIBUTES_DEPTH may nest past the 254
    levels orjson writes: json writes those, in the same compact form."""
    value = {"deep": _nested(300), "name": "café"}
    assert (
        results.json_bytes(value) == json.dumps(value, ensure_ascii=False).replace(" ", "").encode()
    )
    assert json.loads(results.json_line(value)) == value and results.json_line(value)[-1:] == b"\n"


async def test_an_empty_radius_streams_its_summary_alone(client: httpx.AsyncClient) -> None:
    response = await client.get(
        "/v1/impact", params={"source_uri": "s3://nothing.md"}, headers={"Accept": NDJSON}
    )
    assert response.status_code == 200, response.text
    streamed, summary = ndjson_lines(response.text)
    assert streamed == [] and summary["total"] == 0


async def test_a_stream_that_fails_midway_is_cut_off_and_gives_its_connection_back(
    store: PostgresStore,
    owner: asyncpg.Connection,
    database_url: str,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unexpected failure after the 200 (here the summary's count) does not end the stream
    with a summary line: the client sees an incomplete body. The walk's transaction ends with
    it (it was left open, its pooled connection held, until the garbage collector came), and
    the server goes on serving."""
    await derive_many(store, fan())
    lines = 0
    count = walks.ImpactTally.add

    def failing_at_the_tenth(tally: walks.ImpactTally, node: dict[str, Any]) -> None:
        nonlocal lines
        lines += 1
        if lines == 10:
            raise TypeError("cannot count")
        count(tally, node)

    monkeypatch.setattr(walks.ImpactTally, "add", failing_at_the_tenth)
    radius = {"source_uri": "s3://big.md"}
    with live_server.serve(create_app(settings, database_url=database_url)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            with pytest.raises(httpx.RemoteProtocolError):
                await http.get("/v1/impact", params=radius, headers={"Accept": NDJSON})
            assert await owner.fetchval(OPEN_TRANSACTIONS) == 0
            response = await http.get("/v1/impact", params=radius, headers={"Accept": NDJSON})
    assert response.status_code == 200
    streamed, summary = ndjson_lines(response.text)
    assert summary["total"] == len(streamed) >= 500


async def test_the_records_are_read_by_primary_key_never_by_a_scan(
    store: PostgresStore, owner: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    """With statistics that make every answer a large share of the records, a join to the
    records took a hash join over a scan of all of them, then sorted the records (1.7 s against
    0.4 s for 21k answers of 500k records): the file sorts the ids, then reads each record by
    its primary key."""
    await derive_many(store, fan())
    await owner.execute("VACUUM ANALYZE provenance, provenance_children, invalidation_postings")
    values = {"source_uri": "s3://big.md", "kind": "answer", "max_depth": 20}
    plan = await explain_as_app(pool, "blast_radius_by_source", tenant_id="default", **values)
    shapes = [(n["Node Type"], n.get("Relation Name"), n.get("Index Name")) for n in plan]
    assert not seq_scans_of_the_records(plan), shapes
    assert "Hash Join" not in [n["Node Type"] for n in plan], shapes
    assert plan[0]["Node Type"] != "Sort", shapes  # the ids are sorted, not the records
