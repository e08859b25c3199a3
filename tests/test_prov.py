"""W3C PROV out: the walk-back as a PROV document, read back with `prov` in every format."""

import asyncio
from datetime import datetime
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
from prov.constants import PROV_ATTR_ACTIVITY, PROV_ATTR_GENERATED_ENTITY, PROV_ATTR_USED_ENTITY
from prov.identifier import QualifiedName
from prov.model import (
    ProvActivity,
    ProvAgent,
    ProvAttribution,
    ProvDerivation,
    ProvDocument,
    ProvEntity,
    ProvGeneration,
    ProvRecord,
    ProvUsage,
)
from prov.serializers import Registry
from typer.testing import CliRunner

from lineage import cli, derive
from lineage.db.database import Database
from lineage.interop import prov
from lineage.services import walks
from lineage.services.demo import ANSWER_ID, load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore

FORMATS = ("json", "provn", "jsonld", "xml")
Pair = tuple[str, str]


def name(value: Any) -> str:
    assert isinstance(value, QualifiedName)
    return unquote(value.localpart)


def pairs(document: ProvDocument, kind: type[ProvRecord]) -> set[Pair]:
    """(subject, object) of every statement of a kind, as the walk names them."""
    found = set()
    for record in document.get_records(kind):
        first, second = list(record.formal_attributes)[:2]
        found.add((name(first[1]), name(second[1])))
    return found


def derivations(document: ProvDocument) -> set[tuple[str, str, str | None]]:
    found = set()
    for record in document.get_records(ProvDerivation):
        attributes = dict(record.formal_attributes)
        activity = attributes[PROV_ATTR_ACTIVITY]
        found.add(
            (
                name(attributes[PROV_ATTR_GENERATED_ENTITY]),
                name(attributes[PROV_ATTR_USED_ENTITY]),
                name(activity) if activity else None,
            )
        )
    return found


def expected(walk: walks.Walk) -> dict[str, Any]:
    """Each PROV statement the walk implies, computed from the walk alone."""
    reached = {node["context_id"] for node in walk.nodes}
    transform = {n["context_id"]: n["transform_version"] or n["transform"] for n in walk.nodes}
    return {
        "entities": reached,
        "activities": {t for t in transform.values() if t},
        "agents": {n["produced_by"] for n in walk.nodes if n["produced_by"]},
        "derived": {
            (edge["child"], edge["parent"], transform[edge["child"]]) for edge in walk.edges()
        },
        "generated": {(child, t) for child, t in transform.items() if t},
        "used": {
            (transform[edge["child"]], edge["parent"])
            for edge in walk.edges()
            if transform[edge["child"]]
        },
        "attributed": {(n["context_id"], n["produced_by"]) for n in walk.nodes if n["produced_by"]},
    }


def statements(document: ProvDocument) -> dict[str, Any]:
    return {
        "entities": {name(r.identifier) for r in document.get_records(ProvEntity)},
        "activities": {name(r.identifier) for r in document.get_records(ProvActivity)},
        "agents": {name(r.identifier) for r in document.get_records(ProvAgent)},
        "derived": derivations(document),
        "generated": pairs(document, ProvGeneration),
        "used": pairs(document, ProvUsage),
        "attributed": pairs(document, ProvAttribution),
    }


@pytest.fixture
async def incident(store: PostgresStore) -> str:
    """The demo incident plus one hop whose agent and transform need escaping in PROV."""
    await load_incident(store)
    report = await derive(
        store,
        [ANSWER_ID],
        "Report: contractors, 30 days.",
        "summary",
        "weekly report",
        "1.0 beta",
        produced_by="agent c/report <v2> 100%",
        attributes={"model": 'demo "model"'},
    )
    return report.context_id


async def test_every_format_reads_back_as_the_walk(
    incident: str, client: httpx.AsyncClient, database: Database, settings: Settings
) -> None:
    walk = await walks.walk_back(database, settings, "default", incident, None)
    want = expected(walk)
    assert want["derived"] and want["used"] and want["attributed"]  # the walk has each kind
    documents = {}
    for output in FORMATS:
        response = await client.get(f"/v1/contexts/{incident}/prov", params={"format": output})
        assert response.status_code == 200, response.text
        documents[output] = ProvDocument.deserialize(content=response.text, format=output)
        assert statements(documents[output]) == want, output
    assert documents["provn"] == documents["json"] == documents["jsonld"] == documents["xml"]
    assert "weekly report@1.0 beta" in want["activities"]
    assert "agent c/report <v2> 100%" in want["agents"]


async def test_entities_carry_the_record_fields(
    incident: str, client: httpx.AsyncClient, database: Database, settings: Settings
) -> None:
    walk = await walks.walk_back(database, settings, "default", incident, None)
    response = await client.get(f"/v1/contexts/{incident}/prov", params={"format": "provn"})
    assert response.headers["content-type"].startswith("text/provenance-notation")
    document = ProvDocument.deserialize(content=response.text, format="provn")
    entities = {name(r.identifier): r for r in document.get_records(ProvEntity)}
    for node in walk.nodes:
        entity = entities[node["context_id"]]
        assert {name(t) for t in entity.get_attribute("prov:type")} == {node["kind"]}
        assert entity.get_attribute("lineage:content_hash") == {node["content_hash"]}
        assert entity.get_attribute("lineage:source_uri") == (
            {node["source_uri"]} if node["source_uri"] else set()
        )
        [created_at] = entity.get_attribute("lineage:created_at")
        assert created_at == datetime.fromisoformat(node["created_at"])
    assert entities[incident].get_attribute("lineage:attributes") == {
        '{"model":"demo \\"model\\""}'
    }


async def test_max_depth_bounds_the_document(incident: str, client: httpx.AsyncClient) -> None:
    response = await client.get(f"/v1/contexts/{incident}/prov", params={"max_depth": 1})
    document = ProvDocument.deserialize(content=response.text, format="json")
    assert statements(document)["entities"] == {incident, ANSWER_ID}
    assert statements(document)["derived"] == {(incident, ANSWER_ID, "weekly report@1.0 beta")}


def written_without_xml(context_id: str, records: bytes, tenant_id: str, output: str) -> bytes:
    """prov.written_from_json where the prov package has no XML serialiser (as without lxml)."""
    Registry.load_serializers()
    every = Registry.serializers
    Registry.serializers = {k: v for k, v in (every or {}).items() if k != "xml"}
    try:
        return prov.written_from_json(context_id, records, tenant_id, output)
    finally:
        Registry.serializers = every


async def test_bad_requests_say_what_to_fix(
    incident: str, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    unknown = await client.get("/v1/contexts/nope/prov")
    assert unknown.status_code == 404
    wrong = await client.get(f"/v1/contexts/{incident}/prov", params={"format": "rdf"})
    assert wrong.status_code == 422
    assert "json" in wrong.json()["detail"]
    # Without lxml the prov package has no XML serialiser: that is a clear 422, not a 500, also
    # from the worker process that writes it.
    monkeypatch.setattr(prov, "written_from_json", written_without_xml)
    missing = await client.get(f"/v1/contexts/{incident}/prov", params={"format": "xml"})
    assert missing.status_code == 422
    assert missing.json()["rule"] == "prov_format"
    assert "xml" in missing.json()["detail"]


async def test_the_export_command_prints_each_format(
    incident: str, database_url: str, database: Database, settings: Settings
) -> None:
    walk = await walks.walk_back(database, settings, "default", incident, None)
    for output in FORMATS:
        result = await asyncio.to_thread(
            CliRunner().invoke,
            cli.app,
            ["export", "prov", incident, "--format", output],
            env={"LINEAGE_DATABASE_URL": database_url},
        )
        assert result.exit_code == 0, (result.output, result.exception)
        document = ProvDocument.deserialize(content=result.stdout, format=output)
        assert statements(document) == expected(walk), output
    refused = CliRunner().invoke(cli.app, ["export", "prov", incident, "--format", "dot"])
    assert refused.exit_code == 2
    assert "--format must be one of" in refused.output
