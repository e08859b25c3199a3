"""The record: its fields, its rules, and its one canonical form.

The canonical form is what gets signed, hashed into the verifiable log and exported. It is
fixed here and nowhere else: RFC 8785 (JCS) over the fields in `CANONICAL_FIELDS`, with
`created_at` as RFC 3339 UTC with microseconds, and `"v": 1` naming this layout.
"""

import functools
import re
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import rfc8785
from pydantic import BaseModel, ConfigDict, Field

from lineage.core.errors import InvalidRecord
from lineage.core.hashing import VERIFIABLE_ALGORITHMS

CANONICAL_VERSION = 1
CANONICAL_FIELDS = (
    "tenant_id",
    "context_id",
    "parent_ids",
    "kind",
    "source_uri",
    "content_hash",
    "transform",
    "transform_version",
    "produced_by",
    "index_snapshot",
    "trace_id",
    "created_at",
    "attributes",
)

KINDS = frozenset(
    {
        "document",
        "query",
        "chunk",
        "embedding",
        "retrieval",
        "rerank",
        "summary",
        "tool_call",
        "reasoning",
        "plan",
        "prompt",
        "claim",
        "answer",
        "verdict",
        "tombstone",
    }
)
# Kinds that may stand without parents: they enter the graph from outside.
ROOT_KINDS = frozenset({"document", "query", "tool_call"})
# Facts about other records; impact results leave them out unless asked.
BOOKKEEPING_KINDS = frozenset({"verdict", "tombstone"})
# Short, guessable texts: their content hashes are keyed with the tenant's text hash key.
KEYED_KINDS = frozenset({"query", "claim", "answer"})
# The service's own proof: only its own paths write them (forget its tombstones, the judge path
# its verdicts); the public append routes refuse them, whatever the key.
RESERVED_KINDS = BOOKKEEPING_KINDS

# Every pattern is checked with fullmatch (Python's `$` also matches before a final newline)
# and keeps `^…$`, which pydantic-core's Rust engine reads as the end of the text.
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
# Trace ids as people have them: W3C ids, and others (`abc123def456`, a run or request id) made of
# characters that are safe in a URL path, a log line and a header.
SAFE_TRACE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
SAFE_TRACE_ID_RULE = (
    "a trace id is a W3C trace id (32 hex digits) or 1-128 letters, digits and _.:- "
    "starting with a letter or digit"
)
HASH_PATTERN = re.compile(r"^[a-z0-9]+:[0-9a-f]{16,128}$")
# sha256 and hmacsha256, the algorithms the service checks, are 256 bits.
DIGEST_HEX_DIGITS = 64
MAX_PARENTS = 1000
MAX_ATTRIBUTES_BYTES = 16 * 1024
# Well inside what the API's JSON writers take (orjson and pydantic stop near 255 levels).
MAX_ATTRIBUTES_DEPTH = 64
MAX_FIELD_CHARS = 2048
# Agent steps: attributes.session_id groups them; a tool_call says how much its tool could tell.
SESSION_ID = "session_id"
TOOL_DETAILS = ("basic", "enhanced")
MAX_TOOL_NAME_CHARS = 256


def _plain(value: Any) -> bool:
    """True when a compact dump with sorted keys writes exactly RFC 8785's bytes: no floats (their
    formats differ), integers within ±2**53, and ASCII keys (RFC 8785 sorts by UTF-16 units)."""
    if value is None or isinstance(value, str | bool):
        return True
    if isinstance(value, int):
        return abs(value) < 2**53
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    if isinstance(value, dict):
        return all(k.isascii() and _plain(v) for k, v in value.items())
    return False


def canonical_json(value: Any) -> bytes:
    """RFC 8785 (JCS) bytes of a JSON value; the common case without the slow general path."""
    return _canonical_json(value, plain=_plain(value))


def _canonical_json(value: Any, *, plain: bool) -> bytes:
    if plain:
        try:
            # Compact, keys sorted, UTF-8, no float: RFC 8785's bytes, a tenth of json's time.
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            pass  # a lone surrogate: rfc8785 says so in its own words
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        # Not text: the caller's input, refused as every lone surrogate is (422).
        if isinstance(exc.__cause__, UnicodeEncodeError):
            raise exc.__cause__ from exc
        raise


def new_context_id() -> str:
    return "ctx_" + secrets.token_hex(16)


def deterministic_context_id(
    tenant_id: str,
    kind: str,
    parent_ids: list[str],
    content_hash: str,
    source_uri: str | None,
    transform_version: str | None,
) -> str:
    """The same step over the same inputs gets the same id, so a re-run records nothing twice."""
    from lineage.core.hashing import Sha256

    key = canonical_json(
        {
            "tenant_id": tenant_id,
            "kind": kind,
            "parent_ids": parent_ids,
            "content_hash": content_hash,
            "source_uri": source_uri,
            "transform_version": transform_version,
        }
    )
    return "ctx_" + Sha256().hexdigest(key)[:32]


@functools.lru_cache(maxsize=1024)  # the records of a batch share one created_at
def format_timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ContextFields(BaseModel):
    """The fields a caller gives a record, declared once for every shape it takes: the proposal
    and the stored record here, the API's body and answers (lineage/api). The id and the content
    hash may be left to lineage, which makes the one and hashes the text for the other."""

    context_id: str | None = None
    parent_ids: list[str] = Field(default_factory=list)
    kind: str
    source_uri: str | None = None
    content_hash: str | None = None
    transform: str | None = None
    transform_version: str | None = None
    produced_by: str | None = None
    index_snapshot: str | None = None
    trace_id: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)


class NewContext(ContextFields):
    """A record as a caller proposes it; the store stamps the tenant and the time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    context_id: str
    content_hash: str

    def stamped(self, tenant_id: str, created_at: datetime) -> "ContextRecord":
        # From the fields as they are: dumping them first doubled the cost.
        return ContextRecord.model_validate(
            {**self.__dict__, "tenant_id": tenant_id, "created_at": created_at}
        )


class ContextRecord(NewContext):
    """One unit of context as stored. Holds hashes and pointers, never the text itself."""

    tenant_id: str
    created_at: datetime

    def canonical_dict(self) -> dict[str, Any]:
        fields = {name: getattr(self, name) for name in CANONICAL_FIELDS}
        fields["created_at"] = format_timestamp(self.created_at)
        fields["v"] = CANONICAL_VERSION
        return fields

    def canonical_bytes(self) -> bytes:
        # Every other field is a string, None or a list of strings: plain whatever they hold.
        return _canonical_json(self.canonical_dict(), plain=_plain(self.attributes))

    def same_content(self, proposal: NewContext) -> bool:
        """Equal in every field the caller proposed: a replay, not a conflict."""
        stored = self.model_dump(exclude={"tenant_id", "created_at"})
        return canonical_json(stored) == canonical_json(proposal.model_dump())

    def api_dict(self) -> dict[str, Any]:
        fields = self.model_dump(mode="json")
        fields["created_at"] = format_timestamp(self.created_at)
        return fields


def check_id(value: str, what: str) -> None:
    if not ID_PATTERN.fullmatch(value):
        raise InvalidRecord(
            "malformed_id",
            f"{what} {value[:140]!r} must match {ID_PATTERN.pattern} "
            "(start with a letter or digit; letters, digits and _.:@- only; at most 128 chars)",
        )


def check_batch(tenant_id: str, proposals: Sequence[NewContext]) -> None:
    """Every rule a batch must pass that needs no database; raises InvalidRecord."""
    check_id(tenant_id, "tenant_id")
    for proposal in proposals:
        validate(proposal)
    batch_ids = [p.context_id for p in proposals]
    if len(set(batch_ids)) != len(batch_ids):
        raise InvalidRecord("duplicate_id", "a batch lists the same context_id more than once")


def check_digest(digest: str, what: str) -> None:
    """'<algorithm>:<hex>' of an algorithm this service can check, its digest in full."""
    if not HASH_PATTERN.fullmatch(digest):
        raise InvalidRecord(
            "malformed_hash",
            f"{what} {digest[:80]!r} must be '<algorithm>:<hex digest>', e.g. 'sha256:9f86d0…'",
        )
    algorithm, _, hexdigest = digest.partition(":")
    if algorithm not in VERIFIABLE_ALGORITHMS:
        raise InvalidRecord(
            "unverifiable_hash",
            f"{what} algorithm {algorithm!r} cannot be checked by this service; "
            f"use one of {', '.join(VERIFIABLE_ALGORITHMS)}",
        )
    if len(hexdigest) != DIGEST_HEX_DIGITS:
        raise InvalidRecord(
            "malformed_hash",
            f"{what}: a {algorithm} digest is exactly {DIGEST_HEX_DIGITS} hex digits, "
            f"not {len(hexdigest)}",
        )


def validate(record: NewContext) -> None:
    """Every rule that needs no database. Raises InvalidRecord naming the rule."""
    check_id(record.context_id, "context_id")
    if record.kind not in KINDS:
        raise InvalidRecord(
            "unknown_kind", f"kind {record.kind!r} is not one of: {', '.join(sorted(KINDS))}"
        )
    if not record.parent_ids and record.kind not in ROOT_KINDS:
        raise InvalidRecord(
            "missing_parents",
            f"a {record.kind} must name the context ids it was derived from (parent_ids); "
            f"only {', '.join(sorted(ROOT_KINDS))} may be roots",
        )
    if not record.parent_ids and not record.source_uri:
        raise InvalidRecord(
            "root_without_source",
            "a root record (no parents) must say where it came from: source_uri",
        )
    if len(record.parent_ids) > MAX_PARENTS:
        raise InvalidRecord(
            "too_many_parents", f"{len(record.parent_ids)} parents; at most {MAX_PARENTS} allowed"
        )
    for parent_id in record.parent_ids:
        check_id(parent_id, "parent id")
    if len(set(record.parent_ids)) != len(record.parent_ids):
        raise InvalidRecord("duplicate_parent", "parent_ids lists the same id more than once")
    if record.context_id in record.parent_ids:
        raise InvalidRecord("self_parent", "a record cannot be its own parent")
    check_digest(record.content_hash, "content_hash")
    _validate_transform(record)
    _validate_agent_step(record)
    if record.trace_id is not None and not SAFE_TRACE_ID.fullmatch(record.trace_id):
        raise InvalidRecord(
            "malformed_trace_id", f"trace_id {record.trace_id[:140]!r}: {SAFE_TRACE_ID_RULE}"
        )
    for name in ("source_uri", "produced_by", "index_snapshot", "transform"):
        value = getattr(record, name)
        if value is not None and (not value or len(value) > MAX_FIELD_CHARS):
            raise InvalidRecord(
                "bad_field", f"{name} must be a non-empty string of at most {MAX_FIELD_CHARS} chars"
            )
    size = _canonical_size(record.attributes)
    if size > MAX_ATTRIBUTES_BYTES:
        raise InvalidRecord(
            "attributes_too_large", f"attributes are {size} bytes; at most {MAX_ATTRIBUTES_BYTES}"
        )
    _check_values(record.attributes)


def attribute_size(value: Any, depth: int) -> int:
    """The canonical size of `value` stored `depth` levels down in a record's attributes (the
    attributes object is level 1); InvalidRecord, naming the rule, when it cannot be stored."""
    size = _canonical_size(value)
    _check_values(value, depth)
    return size


def _canonical_size(value: Any) -> int:
    try:
        return len(canonical_json(value))
    except (rfc8785.CanonicalizationError, TypeError, ValueError, RecursionError) as exc:
        raise InvalidRecord(
            "bad_attributes", f"attributes must be plain JSON (RFC 8785 canonicalisable): {exc}"
        ) from exc


def _check_values(value: Any, depth: int = 1) -> None:
    """Nesting ends within MAX_ATTRIBUTES_DEPTH levels, so every answer can be written. Numbers
    must read back from jsonb as they were signed: jsonb keeps 1e20 as an integer, whose
    canonical form differs, so magnitudes from 2**53 on are refused."""
    if isinstance(value, dict | list) and depth > MAX_ATTRIBUTES_DEPTH:
        raise InvalidRecord(
            "attributes_too_deep",
            f"attributes nest objects or arrays more than {MAX_ATTRIBUTES_DEPTH} levels deep; "
            "flatten them or send the deep part as a string",
        )
    if isinstance(value, dict):
        for item in value.values():
            _check_values(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_values(item, depth + 1)
    elif isinstance(value, int | float) and not isinstance(value, bool) and abs(value) >= 2**53:
        raise InvalidRecord(
            "number_out_of_range",
            f"attribute number {value!r} is too large; numbers must lie within ±2**53 "
            "(send larger values as strings)",
        )


def _validate_agent_step(record: NewContext) -> None:
    """session_id on any record; on a tool_call, its tool, detail level and hashes."""
    attributes = record.attributes
    session_id = attributes.get(SESSION_ID)
    if session_id is not None and not (
        isinstance(session_id, str) and ID_PATTERN.fullmatch(session_id)
    ):
        raise InvalidRecord(
            "malformed_session_id",
            f"attributes.session_id {str(session_id)[:140]!r} must match {ID_PATTERN.pattern}",
        )
    if record.kind != "tool_call":
        return
    tool = attributes.get("tool")
    if not isinstance(tool, str) or not 0 < len(tool) <= MAX_TOOL_NAME_CHARS:
        raise InvalidRecord(
            "tool_call_without_tool",
            f"a tool_call must name its tool: attributes.tool, 1 to {MAX_TOOL_NAME_CHARS} chars",
        )
    detail = attributes.get("detail", "basic")
    if detail not in TOOL_DETAILS:
        raise InvalidRecord(
            "bad_tool_detail", f"attributes.detail {detail!r} must be 'basic' or 'enhanced'"
        )
    for name in ("input_hash", "output_hash"):
        digest = attributes.get(name)
        if digest is None and detail == "enhanced":
            raise InvalidRecord(
                "enhanced_tool_call_without_hashes",
                f"an enhanced tool_call must give attributes.{name}; use detail 'basic' if the "
                "tool cannot say",
            )
        if digest is not None and not isinstance(digest, str):
            raise InvalidRecord(
                "malformed_hash", f"attributes.{name} must be '<algorithm>:<hex digest>'"
            )
        if digest is not None:
            check_digest(digest, f"attributes.{name}")


def _validate_transform(record: NewContext) -> None:
    version = record.transform_version
    if version is None:
        return
    name, at, number = version.partition("@")
    if not at or not name or not number:
        raise InvalidRecord(
            "malformed_transform_version",
            f"transform_version {version!r} must be 'name@version', e.g. 'chunker@2.3.1'",
        )
    if record.transform is not None and record.transform != name:
        raise InvalidRecord(
            "transform_mismatch",
            f"transform_version {version!r} names {name!r} but transform is {record.transform!r}",
        )
