"""Agent sessions: tool calls, reasoning and plans carry a session id and go through derive()."""

import json
from typing import Any

import asyncpg
import httpx
import pytest

from lineage import derive
from lineage.core.errors import InvalidRecord
from lineage.core.hashing import content_hash
from lineage.core.record import NewContext, validate
from lineage.services.sessions import record_plan, record_reasoning, record_tool_call
from lineage.store.postgres import PostgresStore

SESSION = "sess_7f3a"
HASH = "sha256:" + "ab" * 32


async def session_rows(owner: asyncpg.Connection, session_id: str) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await owner.fetch(
        "SELECT context_id, kind, parent_ids, source_uri, transform, attributes "
        "FROM provenance WHERE attributes ->> 'session_id' = $1 ORDER BY created_at",
        session_id,
    )
    return rows


async def test_an_agent_session_is_recorded_step_by_step(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    query = await derive(store, [], "Which policy applies?", "query", source_uri="chat://s/1")
    plan = await record_plan(
        store, SESSION, [query], "1. search policies 2. answer", produced_by="agent/plan@v1"
    )
    search = await record_tool_call(
        store, SESSION, "search", "contractors.md: 14 days", [plan], input='{"q": "notice"}'
    )
    thought = await record_reasoning(store, SESSION, [search], "The contractor policy governs.")

    rows = await session_rows(owner, SESSION)
    assert [row["context_id"] for row in rows] == [
        plan.context_id,
        search.context_id,
        thought.context_id,
    ]
    assert [row["kind"] for row in rows] == ["plan", "tool_call", "reasoning"]
    assert [list(row["parent_ids"]) for row in rows] == [
        [query.context_id],
        [plan.context_id],
        [search.context_id],
    ]
    tool = rows[1]
    assert tool["transform"] == "search"
    assert json.loads(tool["attributes"]) == {
        "session_id": SESSION,
        "tool": "search",
        "detail": "enhanced",
        "input_hash": content_hash('{"q": "notice"}'),
        "output_hash": content_hash("contractors.md: 14 days"),
    }
    assert search.record.content_hash == content_hash("contractors.md: 14 days")


async def test_a_tool_that_says_little_takes_part_as_basic(
    store: PostgresStore, owner: asyncpg.Connection
) -> None:
    called = await record_tool_call(store, SESSION, "legacy lookup", "42")
    assert called.record.parent_ids == []
    assert called.record.source_uri == "tool://legacy%20lookup"
    assert called.record.attributes == {
        "session_id": SESSION,
        "tool": "legacy lookup",
        "detail": "basic",
        "output_hash": content_hash("42"),
    }
    reported = await record_tool_call(store, SESSION, "remote", "ok", input_hash=HASH)
    assert reported.record.attributes["detail"] == "enhanced"
    assert reported.record.attributes["input_hash"] == HASH
    assert len(await session_rows(owner, SESSION)) == 2


def tool_call(**attributes: Any) -> NewContext:
    return NewContext(
        context_id="call_1",
        kind="tool_call",
        source_uri="tool://search",
        content_hash=HASH,
        attributes=attributes,
    )


@pytest.mark.parametrize(
    ("attributes", "rule"),
    [
        ({"detail": "basic"}, "tool_call_without_tool"),
        ({"tool": ""}, "tool_call_without_tool"),
        ({"tool": 7}, "tool_call_without_tool"),
        ({"tool": "t" * 257}, "tool_call_without_tool"),
        ({"tool": "search", "detail": "full"}, "bad_tool_detail"),
        (
            {"tool": "search", "detail": "enhanced", "output_hash": HASH},
            "enhanced_tool_call_without_hashes",
        ),
        (
            {"tool": "search", "detail": "enhanced", "input_hash": HASH},
            "enhanced_tool_call_without_hashes",
        ),
        ({"tool": "search", "input_hash": "9f86d0"}, "malformed_hash"),
        ({"tool": "search", "output_hash": ["sha256:00"]}, "malformed_hash"),
        ({"tool": "search", "session_id": "has space"}, "malformed_session_id"),
        ({"tool": "search", "session_id": 17}, "malformed_session_id"),
        ({"tool": "search", "session_id": "-leading-dash"}, "malformed_session_id"),
    ],
)
def test_tool_call_attributes_are_checked(attributes: dict[str, Any], rule: str) -> None:
    with pytest.raises(InvalidRecord) as caught:
        validate(tool_call(**attributes))
    assert caught.value.rule == rule


def test_valid_tool_calls_and_session_ids_pass() -> None:
    validate(tool_call(tool="search"))
    validate(tool_call(tool="search", detail="basic", output_hash=HASH))
    validate(tool_call(tool="search", detail="enhanced", input_hash=HASH, output_hash=HASH))
    validate(tool_call(tool="search", session_id="sess:2026-09-01@agent_b"))
    # Other kinds carry a session id too, and need no tool.
    validate(
        NewContext(
            context_id="r_1",
            kind="reasoning",
            parent_ids=["q_1"],
            content_hash=HASH,
            attributes={"session_id": SESSION},
        )
    )


async def test_a_bad_step_writes_nothing(store: PostgresStore, owner: asyncpg.Connection) -> None:
    query = await derive(store, [], "q", "query", source_uri="chat://s/2")
    with pytest.raises(InvalidRecord) as caught:
        await record_plan(store, "not a session id", [query], "plan")
    assert caught.value.rule == "malformed_session_id"
    assert "attributes.session_id" in caught.value.message
    with pytest.raises(InvalidRecord) as missing:
        await record_reasoning(store, SESSION, [], "a thought from nowhere")
    assert missing.value.rule == "missing_parents"
    assert await owner.fetchval("SELECT count(*) FROM provenance") == 1


async def test_the_api_refuses_a_tool_call_without_its_tool(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/contexts",
        json={
            "kind": "tool_call",
            "text": "result",
            "source_uri": "tool://search",
            "attributes": {"session_id": SESSION, "detail": "enhanced"},
        },
    )
    assert response.status_code == 422
    assert response.json()["rule"] == "tool_call_without_tool"
    assert "attributes.tool" in response.json()["detail"]
