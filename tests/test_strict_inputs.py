"""Ids, hashes, times and switches are taken only in their one written form.

Python's `re` lets `$` match before a trailing newline, pydantic-core's Rust regex does not: an
id checked by `re.match` took `"nl_id_demo\\n"` and stored it. Digests are exactly 64 hex for
the algorithms the service checks, a tool's hashes included; a time is an ISO 8601 date or time,
never a number read as seconds since 1970; a switch in a body is true or false, not 0.0 or
"yes"."""

from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from lineage.api.routes.answers import AnswerIn
from lineage.api.routes.privacy import SettingsIn
from lineage.core.errors import InvalidRecord
from lineage.core.hashing import content_hash
from lineage.core.queries import QueryIn
from lineage.core.record import NewContext, validate
from lineage.core.telemetry import checked_trace_id
from lineage.services.auth import KEY_PATTERN
from lineage.settings import Settings

HASH = content_hash("some text")
HEX64 = "0" * 64


def proposal(**fields: object) -> NewContext:
    base: dict[str, object] = {
        "context_id": "ctx_1",
        "kind": "chunk",
        "parent_ids": ["doc_1"],
        "content_hash": HASH,
    }
    return NewContext.model_validate(base | fields)


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"context_id": "nl_id_demo\n"}, "malformed_id"),
        ({"parent_ids": ["doc_1\n"]}, "malformed_id"),
        ({"trace_id": "abc123\n"}, "malformed_trace_id"),
        ({"content_hash": HASH + "\n"}, "malformed_hash"),
        ({"attributes": {"session_id": "s1\n"}}, "malformed_session_id"),
        ({"content_hash": "sha256:" + "0" * 16}, "malformed_hash"),
        ({"content_hash": "sha256:" + "0" * 128}, "malformed_hash"),
        ({"content_hash": "hmacsha256:" + "0" * 63}, "malformed_hash"),
        ({"kind": "tool_call", "attributes": {"tool": "t", "input_hash": "md5:" + "0" * 32}},
         "unverifiable_hash"),
        ({"kind": "tool_call", "attributes": {"tool": "t", "output_hash": "crc32:" + "0" * 16}},
         "unverifiable_hash"),
        ({"kind": "tool_call", "attributes": {"tool": "t", "output_hash": "sha256:" + "0" * 16}},
         "malformed_hash"),
    ],
)  # fmt: skip
def test_a_record_takes_ids_and_digests_only_in_their_one_form(
    fields: dict[str, object], rule: str
) -> None:
    with pytest.raises(InvalidRecord) as caught:
        validate(proposal(**fields))
    assert caught.value.rule == rule, caught.value


def test_well_formed_digests_still_pass() -> None:
    validate(proposal(content_hash="hmacsha256:" + HEX64))
    validate(proposal(kind="tool_call", attributes={"tool": "t", "input_hash": "sha256:" + HEX64}))


def test_other_pattern_checks_refuse_a_trailing_newline() -> None:
    assert KEY_PATTERN.fullmatch("lk_" + "0" * 16 + "_" + "a" * 43)
    with pytest.raises(Exception, match="trace id"):
        checked_trace_id("4bf92f3577b34da6a3ce929d0e0e4736\n")


def test_pydantic_patterns_refuse_a_trailing_newline() -> None:
    """The same patterns under pydantic-core's own engine."""
    with pytest.raises(ValidationError):
        QueryIn(request_id="req_1\n", query="q", answer="a")
    QueryIn(request_id="req_1", query="q", answer="a")
    with pytest.raises(ValidationError):
        Settings(log_origin="lineage\n")


@pytest.mark.parametrize("flag", [0.0, 1, "yes", "0"])
def test_body_switches_are_true_or_false_only(flag: Any) -> None:
    with pytest.raises(ValidationError):
        SettingsIn.model_validate_json(f'{{"capture_query_text": {_json(flag)}}}')
    with pytest.raises(ValidationError):
        AnswerIn.model_validate_json(
            f'{{"prompt_id": "p", "output": {{}}, "capture_text": {_json(flag)}}}'
        )


def _json(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


async def test_an_id_with_a_trailing_newline_is_not_stored(client: httpx.AsyncClient) -> None:
    body = {"context_id": "nl_id_demo\n", "kind": "document", "text": "t", "source_uri": "s3://a"}
    answer = await client.post("/v1/contexts", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["rule"] == "malformed_id"
    assert (await client.get("/v1/contexts/nl_id_demo%0A")).status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/v1/contexts?since={}",
        "/v1/contexts?until={}",
        "/v1/reports/claims?since={}",
        "/v1/reports/drift?since={}",
        "/v1/audit?since={}",
    ],
)
@pytest.mark.parametrize("value", ["0.5", "0", "1700000000"])
async def test_a_time_parameter_is_an_iso_date_never_a_number(
    client: httpx.AsyncClient, path: str, value: str
) -> None:
    answer = await client.get(path.format(value))
    assert answer.status_code == 422, (path, value, answer.text)
    assert "ISO 8601" in answer.json()["detail"], answer.json()


async def test_a_time_parameter_still_takes_dates_and_times(client: httpx.AsyncClient) -> None:
    for value in ("2026-09-01", "2026-09-01T12:00:00Z", "2026-09-01T12:00:00%2B02:00"):
        answer = await client.get(f"/v1/contexts?since={value}")
        assert answer.status_code == 200, (value, answer.text)
