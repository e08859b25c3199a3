"""Errors in one table: every error class is a LineageError in lineage/core/errors.py with its
status and rule, and the API answers each as problem+json with exactly those."""

import ast
import json
from pathlib import Path

import httpx
import pytest

from lineage.api.problems import PROBLEM, answer
from lineage.core import errors
from lineage.core.errors import InvalidRecord, LineageError

PACKAGE = Path(errors.__file__).parent.parent


def error_classes() -> list[type[LineageError]]:
    found = [
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, LineageError)
    ]
    return sorted(found, key=lambda cls: cls.__name__)


def test_no_exception_class_is_defined_outside_the_error_table() -> None:
    elsewhere = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == Path(errors.__file__):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            bases = [ast.unparse(base) for base in getattr(node, "bases", [])]
            if isinstance(node, ast.ClassDef) and any(
                base.endswith(("Error", "Exception")) or base in {"LineageError", "NotFound"}
                for base in bases
            ):
                elsewhere.append(f"{path.relative_to(PACKAGE.parent)}: {node.name}({bases})")
    assert elsewhere == []


@pytest.mark.parametrize("cls", error_classes(), ids=lambda cls: cls.__name__)
def test_each_error_is_answered_with_its_status_and_rule(cls: type[LineageError]) -> None:
    assert cls.__doc__, f"{cls.__name__} says nothing about when it is raised"
    made = cls("rule_x", "what to fix") if issubclass(cls, InvalidRecord) else cls("what to fix")
    response = answer(made)
    body = json.loads(bytes(response.body))
    assert response.status_code == cls.status == body["status"]
    assert response.media_type == PROBLEM
    assert body["rule"] == made.rule
    if cls is not LineageError and not issubclass(cls, InvalidRecord):
        assert "rule" in vars(cls), f"{cls.__name__} names no rule of its own"
    assert body["detail"] == "what to fix"
    assert body["title"] == (cls.title or cls.__name__)
    for header, value in cls.headers.items():
        assert response.headers[header] == value


async def test_a_path_or_method_the_api_lacks_is_a_problem_too(client: httpx.AsyncClient) -> None:
    missing = await client.get("/v1/no-such-thing")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == PROBLEM
    assert missing.json()["rule"] == "not_found"
    wrong_method = await client.put("/healthz")
    assert wrong_method.status_code == 405
    assert wrong_method.json()["rule"] == "method_not_allowed"
    assert wrong_method.headers["allow"] == "GET"


@pytest.mark.parametrize(
    ("path", "methods"),
    [("/v1/contexts", {"GET", "POST"}), ("/v1/keys", {"GET", "POST"}),
     ("/v1/session", {"POST", "DELETE"}), ("/v1/tenant/settings", {"GET", "PUT"})],
)  # fmt: skip
async def test_a_405_allows_every_method_of_the_path(
    client: httpx.AsyncClient, path: str, methods: set[str]
) -> None:
    """Routes of one path are separate routes, in several routers: the 405 lists them all."""
    answer = await client.request("OPTIONS", path)
    assert answer.status_code == 405
    assert set(answer.headers["allow"].split(", ")) - {"HEAD"} == methods


async def test_a_batch_body_that_is_not_utf8_is_a_422(client: httpx.AsyncClient) -> None:
    for body in (b"T\xff\xfe\x15\r", b"\xff" * 100_000):  # parsed on the loop, and off it
        answer = await client.post(
            "/v1/contexts/batch", content=body, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 422, answer.text
        assert answer.headers["content-type"] == PROBLEM


@pytest.mark.parametrize("cls", error_classes(), ids=lambda cls: cls.__name__)
def test_each_answer_comes_back_as_its_error(cls: type[LineageError]) -> None:
    """What a client of the API (the SDK's HTTP store) raises for a problem: the class its rule
    names, so each fixed rule belongs to one class."""
    made = cls("rule_x", "what to fix") if issubclass(cls, InvalidRecord) else cls("what to fix")
    back = errors.error_of_answer(made.status, json.loads(bytes(answer(made).body)))
    if issubclass(cls, InvalidRecord):
        assert type(back) is InvalidRecord and back.rule == "rule_x"
    else:
        assert type(back) is cls
    assert back.detail == "what to fix"


@pytest.mark.parametrize(
    ("status", "expected"),
    [(401, errors.Unauthorized), (403, errors.Forbidden), (404, errors.NotFound),
     (409, errors.Conflict), (502, errors.StoreUnavailable), (429, errors.StoreUnavailable),
     (400, InvalidRecord)],
)  # fmt: skip
def test_an_answer_without_a_rule_is_read_by_its_status(
    status: int, expected: type[LineageError]
) -> None:
    """A proxy's page or a crashed server's: nothing but the status to go by."""
    back = errors.error_of_answer(status, {})
    assert type(back) is expected
    assert back.detail == f"the lineage API answered {status}"
