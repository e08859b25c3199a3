"""Typed responses: the OpenAPI schema documents every body as it is sent (tests/test_fuzz.py
checks real responses against it)."""

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from lineage.api.app import create_app
from lineage.api.models import Edge, Record, WalkBack
from lineage.api.problems import PROBLEM
from lineage.core.record import ContextRecord, NewContext
from lineage.settings import Settings

PROBLEM_SCHEMA = {"schema": {"$ref": "#/components/schemas/Problem"}}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    app = create_app(Settings(auth="none"), database_url="postgresql://unused@127.0.0.1/unused")
    openapi: dict[str, Any] = app.openapi()
    return openapi


def operations(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{method.upper()} {path}", operation)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
    ]


def test_every_success_documents_its_body(schema: dict[str, Any]) -> None:
    undocumented = []
    for name, operation in operations(schema):
        for status, response in operation["responses"].items():
            if not status.startswith("2") or status == "204":
                continue
            content = response.get("content", {})
            json_schema = content.get("application/json", {}).get("schema")
            others = set(content) - {"application/json"}
            # A JSON body is a model; a route sending other formats documents each media type.
            if json_schema is None and others:
                continue
            if "$ref" not in (json_schema or {}) and not (others and json_schema):
                undocumented.append(f"{name} {status}")
    assert len(operations(schema)) >= 37
    assert undocumented == []


def test_every_error_is_documented_as_problem_json(schema: dict[str, Any]) -> None:
    for name, operation in operations(schema):
        errors = {s: r for s, r in operation["responses"].items() if s[0] in "45"}
        assert {"4XX", "5XX"} <= set(errors), name
        assert all(r["content"] == {PROBLEM: PROBLEM_SCHEMA} for r in errors.values()), name
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    assert "Problem" in schema["components"]["schemas"]


def test_a_model_keeps_the_routes_keys_and_their_order() -> None:
    sent = {
        "truncated": False, "truncated_reason": None,
        "edges": [{"child": "a", "parent": "b", "why": 1}], "nodes": [],
    }  # fmt: skip
    body = WalkBack.model_validate({"context_id": "x", **sent})
    assert list(body.model_dump(mode="json")) == [
        "context_id", "truncated", "truncated_reason", "edges", "nodes",
    ]  # fmt: skip
    assert body.model_dump(mode="json")["edges"] == sent["edges"]
    assert list(Edge.model_json_schema()["properties"]) == ["parent", "child"]


def test_a_record_answer_sends_every_field_the_body_needs_only_kind(
    schema: dict[str, Any],
) -> None:
    schemas = schema["components"]["schemas"]
    for answer in ("Record", "CheckedRecord", "SignedRecord"):
        assert set(schemas[answer]["required"]) >= set(ContextRecord.model_fields), answer
    assert set(schemas["WalkNode"]["required"]) == {*NewContext.model_fields, "created_at"} | {
        "depth", "truncated",
    }  # fmt: skip
    assert "signature" not in schemas["CheckedRecord"]["required"]
    assert schemas["ContextIn"]["required"] == ["kind"]
    assert set(schemas["ContextIn"]["properties"]) == {*NewContext.model_fields, "text"}


def test_a_record_answer_lacking_a_field_is_refused() -> None:
    record = ContextRecord(
        context_id="doc_1", kind="document", source_uri="file:a", content_hash="sha256:" + "0" * 64,
        tenant_id="acme", created_at=datetime.now(UTC),
    ).api_dict()  # fmt: skip
    assert Record.model_validate(record).model_dump(mode="json") == record
    del record["index_snapshot"]
    with pytest.raises(ValidationError, match="the record lacks index_snapshot"):
        Record.model_validate(record)


# Routes anyone may call: no key, so no security requirement and no 401 or 403 to document.
OPEN_OPERATIONS = {"GET /healthz", "GET /readyz", "POST /v1/session", "DELETE /v1/session"}


def test_the_bearer_scheme_is_documented(schema: dict[str, Any]) -> None:
    schemes = schema["components"]["securitySchemes"]
    assert schemes["bearer"]["type"] == "http"
    assert schemes["bearer"]["scheme"] == "bearer"
    assert "lineage key create" in schemes["bearer"]["description"]


def test_every_protected_operation_needs_a_key_and_documents_401_and_403(
    schema: dict[str, Any],
) -> None:
    names = {name for name, _ in operations(schema)}
    assert names >= OPEN_OPERATIONS
    for name, operation in operations(schema):
        responses = operation["responses"]
        if name in OPEN_OPERATIONS:
            assert "security" not in operation, name
            assert not {"401", "403"} & set(responses), name
            continue
        schemes = {scheme for requirement in operation["security"] for scheme in requirement}
        assert schemes == ({"metrics_token"} if name == "GET /metrics" else {"bearer"}), name
        for status in ("401", "403"):
            assert responses[status]["content"] == {PROBLEM: PROBLEM_SCHEMA}, (name, status)


def test_each_operation_names_the_scope_its_key_needs(schema: dict[str, Any]) -> None:
    paths = schema["paths"]
    assert paths["/v1/keys"]["post"]["security"] == [{"bearer": ["admin"]}]
    assert paths["/v1/contexts"]["get"]["security"] == [{"bearer": ["read"]}]
    assert paths["/v1/contexts"]["post"]["security"] == [{"bearer": ["ingest"]}]
    assert "scope admin" in paths["/v1/keys"]["post"]["responses"]["403"]["description"]
