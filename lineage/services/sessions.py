"""Agent sessions: the tool calls, reasoning and plans an agent makes between retrieval and
answer, each recorded through derive() with the session it belongs to.

Every record carries `attributes.session_id` (an id: letters, digits and `_.:@-`, at most 128
chars), so a session's steps can be picked out of a trace or a live stream. A `tool_call` also
carries `attributes.tool` (its name), `attributes.detail` and the hashes of what went in and came
out (`input_hash`, `output_hash`): `enhanced` when both hashes are known, `basic` when the tool
can say less (its name, and whichever hash it has). lineage.core.record.validate() checks all of it,
whoever writes the record.
"""

from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import quote

from lineage.core.derive import Context, derive
from lineage.core.hashing import content_hash
from lineage.core.record import SESSION_ID
from lineage.core.store import Store

__all__ = ["ToolDetail", "record_plan", "record_reasoning", "record_tool_call"]

ToolDetail = Literal["basic", "enhanced"]


async def record_tool_call(
    store: Store,
    session_id: str,
    tool: str,
    output: str,
    parents: Sequence[Context | str] = (),
    *,
    input: str | None = None,
    input_hash: str | None = None,
    version: str | None = None,
    produced_by: str | None = None,
    trace_id: str | None = None,
    source_uri: str | None = None,
    attributes: dict[str, Any] | None = None,
) -> Context:
    """Record what a tool returned (`output`, the text later steps consume) as a tool_call.

    Give `input` (the call's arguments as text) or, when the tool only reports it,
    `input_hash`: with either the record is `enhanced`, else `basic`. A tool_call with no
    parents is a root and comes from `source_uri`, by default `tool://<tool>`.
    """
    digest_in = content_hash(input) if input is not None else input_hash
    details: dict[str, Any] = {
        "tool": tool,
        "detail": "enhanced" if digest_in is not None else "basic",
        "output_hash": content_hash(output),
    }
    if digest_in is not None:
        details["input_hash"] = digest_in
    root_source = None if parents else f"tool://{quote(tool, safe='')}"
    return await derive(
        store,
        parents,
        output,
        "tool_call",
        tool,
        version,
        produced_by=produced_by,
        trace_id=trace_id,
        source_uri=source_uri or root_source,
        attributes=(attributes or {}) | details | {SESSION_ID: session_id},
    )


async def record_reasoning(
    store: Store,
    session_id: str,
    parents: Sequence[Context | str],
    text: str,
    *,
    produced_by: str | None = None,
    trace_id: str | None = None,
    attributes: dict[str, Any] | None = None,
) -> Context:
    """Record a reasoning step over what it read (`parents`, at least one)."""
    return await _record_step(
        store, "reasoning", session_id, parents, text, produced_by, trace_id, attributes
    )


async def record_plan(
    store: Store,
    session_id: str,
    parents: Sequence[Context | str],
    text: str,
    *,
    produced_by: str | None = None,
    trace_id: str | None = None,
    attributes: dict[str, Any] | None = None,
) -> Context:
    """Record a plan and what it was made from (`parents`, at least one: the query, say)."""
    return await _record_step(
        store, "plan", session_id, parents, text, produced_by, trace_id, attributes
    )


async def _record_step(
    store: Store,
    kind: str,
    session_id: str,
    parents: Sequence[Context | str],
    text: str,
    produced_by: str | None,
    trace_id: str | None,
    attributes: dict[str, Any] | None,
) -> Context:
    return await derive(
        store,
        parents,
        text,
        kind,
        produced_by=produced_by,
        trace_id=trace_id,
        attributes=(attributes or {}) | {SESSION_ID: session_id},
    )
