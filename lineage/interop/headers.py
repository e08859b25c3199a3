"""Provenance headers for generated files: a record's provenance as YAML front-matter or as a
JSON envelope, for tools that write generated documents (an answer, a report, a summary).

The header's fields, in order:

- `context_id`, `trace_id`, `produced_by` (agent and prompt version): the record's own;
- `operation`: attributes `operation`, else `gen_ai.operation.name`, else the record's
  transform_version, else its transform, else its kind;
- `provider`: attributes `provider`, else `gen_ai.provider.name`, else `gen_ai.system`, else
  the service layer's;
- `model`: attributes `model` (record_answer sets it), else `gen_ai.response.model`, else
  `gen_ai.request.model`, else the service layer's;
- `generated_at`: the record's created_at (RFC 3339 UTC);
- `consumed_ids`: what it was made from, sorted: its parents, looking through the `claim` and
  `prompt` records that record_answer puts between an answer and the contexts its model read;
- `inputs_fingerprint`: `sha256:` + the SHA-256 of the consumed records' content hashes,
  sorted, each followed by a newline. It changes exactly when what was consumed changes;
- `request`: the layers read from the stored spans of the record's trace (lineage.interop.layers):
  the request, its `service` (the span the record was made from) and that one's `transport`;
  null when none of the trace's spans is stored.
"""

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from lineage.core.errors import NotFound
from lineage.core.record import ContextRecord, format_timestamp
from lineage.db.database import Database, Transaction
from lineage.interop.layers import request_layers
from lineage.services.records import get_records

__all__ = [
    "LOOKED_THROUGH",
    "ProvenanceHeader",
    "envelope",
    "front_matter",
    "inputs_fingerprint",
    "provenance_header",
]

# Records made on the way from what a model read to what it said: their parents are the inputs.
LOOKED_THROUGH = frozenset({"claim", "prompt"})
# A prompt's parents are contexts, a claim's are a prompt and contexts: a few hops suffice.
MAX_HOPS = 8
OPERATION_KEYS = ("operation", "gen_ai.operation.name")
PROVIDER_KEYS = ("provider", "gen_ai.provider.name", "gen_ai.system")
MODEL_KEYS = ("model", "gen_ai.response.model", "gen_ai.request.model")
# YAML reads these as line breaks or refuses them even inside a double-quoted scalar.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufffe\uffff]")
# Keys written plain; the words YAML 1.1 would read as booleans or null are quoted.
_YAML_PLAIN_KEY = re.compile(r"[a-z_][a-z0-9_]*")
_YAML_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})


@dataclass(frozen=True)
class ProvenanceHeader:
    context_id: str
    trace_id: str | None
    operation: str
    provider: str | None
    model: str | None
    produced_by: str | None
    generated_at: str
    inputs_fingerprint: str
    consumed_ids: list[str]
    request: dict[str, Any] | None


def inputs_fingerprint(content_hashes: list[str]) -> str:
    digest = hashlib.sha256("".join(f"{h}\n" for h in sorted(content_hashes)).encode())
    return f"sha256:{digest.hexdigest()}"


def _first(attributes: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None


async def _consumed(tx: Transaction, record: ContextRecord) -> dict[str, ContextRecord]:
    consumed: dict[str, ContextRecord] = {}
    seen = {record.context_id}
    frontier = list(record.parent_ids)
    for _ in range(MAX_HOPS):
        if not frontier:
            break
        seen.update(frontier)
        found = await get_records(tx, frontier)
        frontier = []
        for parent in found.values():
            if parent.kind in LOOKED_THROUGH:
                frontier += [p for p in parent.parent_ids if p not in seen]
            else:
                consumed[parent.context_id] = parent
        frontier = list(dict.fromkeys(frontier))
    return consumed


async def provenance_header(
    database: Database, tenant_id: str, context_id: str
) -> ProvenanceHeader:
    """The header of one record (an answer, usually); NotFound for an unknown id."""
    async with database.tenant(tenant_id) as tx:
        record = (await get_records(tx, [context_id])).get(context_id)
        if record is None:
            raise NotFound(f"no context {context_id}")
        consumed = await _consumed(tx, record)
        traced = (context_id, record.trace_id, record.attributes)
        max_spans = database.settings.max_spans_per_trace
        request = (await request_layers(tx, [traced], max_spans))[context_id]
    attributes = record.attributes
    service = (request or {}).get("service") or {}
    return ProvenanceHeader(
        context_id=record.context_id,
        trace_id=record.trace_id,
        operation=_first(attributes, OPERATION_KEYS)
        or record.transform_version
        or record.transform
        or record.kind,
        provider=_first(attributes, PROVIDER_KEYS) or service.get("provider"),
        model=_first(attributes, MODEL_KEYS) or service.get("model"),
        produced_by=record.produced_by,
        generated_at=format_timestamp(record.created_at),
        inputs_fingerprint=inputs_fingerprint([c.content_hash for c in consumed.values()]),
        consumed_ids=sorted(consumed),
        request=request,
    )


def _yaml_value(value: Any) -> str:
    """JSON is YAML's flow style, and a JSON string a double-quoted scalar once YAML's own line
    breaks are escaped."""
    text = json.dumps(value, ensure_ascii=False)
    return _YAML_UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _yaml_key(key: str) -> str:
    """A key as written when plain YAML reads it back as itself, else quoted."""
    return key if _YAML_PLAIN_KEY.fullmatch(key) and key not in _YAML_WORDS else _yaml_value(key)


def _yaml_lines(key: str, value: Any, indent: str) -> list[str]:
    """`key: value` in block style, maps and lists of maps nested."""
    head = f"{indent}{_yaml_key(key)}:"
    if isinstance(value, dict) and value:
        return [
            head,
            *(line for k, v in value.items() for line in _yaml_lines(k, v, indent + "  ")),
        ]
    if isinstance(value, list) and value:
        return [head, *(line for item in value for line in _yaml_item(item, indent + "  "))]
    return [f"{head} {_yaml_value(value)}"]


def _yaml_item(item: Any, indent: str) -> list[str]:
    """One list item: `- value`, or a map whose first key follows the dash."""
    if isinstance(item, dict) and item:
        lines = [line for k, v in item.items() for line in _yaml_lines(k, v, indent + "  ")]
        return [f"{indent}- {lines[0].lstrip()}", *lines[1:]]
    return [f"{indent}- {_yaml_value(item)}"]


def front_matter(header: ProvenanceHeader, body: str = "") -> str:
    """`body` headed by a YAML front-matter block holding the header under `provenance:`."""
    lines = ["---", *_yaml_lines("provenance", asdict(header), ""), "---", ""]
    return "\n".join(lines) + body


def envelope(header: ProvenanceHeader, content: Any = None) -> dict[str, Any]:
    """`{"provenance": header}`, with `content` beside it when given."""
    wrapped: dict[str, Any] = {"provenance": asdict(header)}
    if content is not None:
        wrapped["content"] = content
    return wrapped
