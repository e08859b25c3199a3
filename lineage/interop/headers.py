"""Provenance headers for generated files: a record's provenance as YAML front-matter or as a
JSON envelope, for tools that write generated documents (an answer, a report, a summary).

The header's fields, in order:

- `context_id`, `trace_id`, `produced_by` (agent and prompt version): the record's own;
- `operation`: attributes `operation`, else `gen_ai.operation.name`, else the record's
  transform_version, else its transform, else its kind;
- `provider`: attributes `provider`, else `gen_ai.provider.name`, else `gen_ai.system`;
- `model`: attributes `model` (record_answer sets it), else `gen_ai.response.model`, else
  `gen_ai.request.model`;
- `generated_at`: the record's created_at (RFC 3339 UTC);
- `consumed_ids`: what it was made from, sorted: its parents, looking through the `claim` and
  `prompt` records that record_answer puts between an answer and the contexts its model read;
- `inputs_fingerprint`: `sha256:` + the SHA-256 of the consumed records' content hashes,
  sorted, each followed by a newline. It changes exactly when what was consumed changes.
"""

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from lineage.core.errors import NotFound
from lineage.core.record import ContextRecord, format_timestamp
from lineage.db.database import Database, Transaction
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
    attributes = record.attributes
    return ProvenanceHeader(
        context_id=record.context_id,
        trace_id=record.trace_id,
        operation=_first(attributes, OPERATION_KEYS)
        or record.transform_version
        or record.transform
        or record.kind,
        provider=_first(attributes, PROVIDER_KEYS),
        model=_first(attributes, MODEL_KEYS),
        produced_by=record.produced_by,
        generated_at=format_timestamp(record.created_at),
        inputs_fingerprint=inputs_fingerprint([c.content_hash for c in consumed.values()]),
        consumed_ids=sorted(consumed),
    )


def _yaml_scalar(value: str | None) -> str:
    """A JSON string is a YAML double-quoted scalar once YAML's own line breaks are escaped."""
    text = json.dumps(value, ensure_ascii=False)
    return _YAML_UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def front_matter(header: ProvenanceHeader, body: str = "") -> str:
    """`body` headed by a YAML front-matter block holding the header under `provenance:`."""
    lines = ["---", "provenance:"]
    for key, value in asdict(header).items():
        if isinstance(value, list):
            lines.append(f"  {key}:" + ("" if value else " []"))
            lines += [f"    - {_yaml_scalar(item)}" for item in value]
        else:
            lines.append(f"  {key}: {_yaml_scalar(value)}")
    return "\n".join([*lines, "---", ""]) + body


def envelope(header: ProvenanceHeader, content: Any = None) -> dict[str, Any]:
    """`{"provenance": header}`, with `content` beside it when given."""
    wrapped: dict[str, Any] = {"provenance": asdict(header)}
    if content is not None:
        wrapped["content"] = content
    return wrapped
