"""derive(): the only constructor of context. It hashes the text, records the hash (never the
text) with the parents and the transform that made it, and hands the text back to the caller."""

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lineage.core import telemetry
from lineage.core.errors import InvalidRecord
from lineage.core.hashing import ContentHasher, HmacSha256, content_hash
from lineage.core.record import (
    KEYED_KINDS,
    ContextRecord,
    NewContext,
    deterministic_context_id,
    new_context_id,
)
from lineage.core.store import Store


@dataclass(frozen=True)
class Context:
    """What a pipeline step holds: the id to pass downstream, and the text it is about."""

    context_id: str
    text: str
    parent_ids: list[str]
    record: ContextRecord
    spooled: bool = False  # not stored yet: in the local spool, or queued to send


@dataclass(frozen=True)
class Derivation:
    """One derive() call's arguments, for derive_many()."""

    parents: Sequence["Context | str"]
    text: str
    kind: str
    transform: str | None = None
    version: str | None = None
    produced_by: str | None = None
    index_snapshot: str | None = None
    source_uri: str | None = None
    trace_id: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    context_id: str | None = None
    deterministic: bool = False


def _transform_version(transform: str | None, version: str | None) -> str | None:
    if version is None:
        return None
    if transform and version.startswith(f"{transform}@"):
        return version
    return f"{transform}@{version}"


def propose(
    tenant_id: str,
    item: Derivation,
    hasher: ContentHasher | None = None,
    text_hasher: HmacSha256 | None = None,
) -> NewContext:
    """The record for one Derivation. Query, claim and answer texts are hashed with the
    tenant's `text_hasher`, else with sha256 for the store to key (lineage.services.privacy); a
    deterministic id for one of them is made from its keyed hash, so it needs `text_hasher`."""
    if not isinstance(item.attributes, dict):
        raise InvalidRecord(
            "bad_attributes",
            "attributes must be a JSON object (a dict of names to values), not "
            f"{item.attributes!r:.80}",
        )
    parent_ids = [p if isinstance(p, str) else p.context_id for p in item.parents]
    keyed = item.kind in KEYED_KINDS
    digest = content_hash(item.text, text_hasher if keyed else hasher)
    transform_version = _transform_version(item.transform, item.version)
    context_id = item.context_id
    if context_id is None:
        if item.deterministic and keyed and text_hasher is None:
            raise InvalidRecord(
                "deterministic_keyed_id",
                f"a deterministic id for a {item.kind} is made from its keyed hash, which only "
                "the service can make: name the context_id, or derive through a PostgresStore",
            )
        context_id = (
            deterministic_context_id(
                tenant_id, item.kind, parent_ids, digest, item.source_uri, transform_version
            )
            if item.deterministic
            else new_context_id()
        )
    return NewContext(
        context_id=context_id,
        parent_ids=parent_ids,
        kind=item.kind,
        source_uri=item.source_uri,
        content_hash=digest,
        transform=item.transform,
        transform_version=transform_version,
        produced_by=item.produced_by,
        index_snapshot=item.index_snapshot,
        trace_id=item.trace_id or telemetry.current_trace_id(),
        attributes=dict(item.attributes),
    )


# Each store's tenant key, read once: only deterministic ids of keyed kinds need it here.
_text_hashers: "weakref.WeakKeyDictionary[Store, HmacSha256]" = weakref.WeakKeyDictionary()


async def _text_hasher(store: Store) -> HmacSha256 | None:
    """The tenant's keyed hasher where the store reaches its database, else None."""
    if store not in _text_hashers:
        key = await store.text_hash_key()
        if key is None:
            return None
        _text_hashers[store] = HmacSha256(key)
    return _text_hashers[store]


async def derive_many(
    store: Store,
    items: Sequence[Derivation],
    hasher: ContentHasher | None = None,
    *,
    capture_text: bool = False,
) -> list[Context]:
    """Record many units in one transaction (all or none); parents may come earlier in items.

    `hasher` hashes documents and every kind but query, claim and answer, whose hashes are
    always keyed with the tenant's text hash key (lineage.services.privacy). `capture_text`
    (opt-in, the tenant's switches permitting) also keeps the texts, in the same transaction.
    """
    text_hasher = None
    if any(i.deterministic and i.context_id is None and i.kind in KEYED_KINDS for i in items):
        text_hasher = await _text_hasher(store)
    proposals = [propose(store.tenant_id, item, hasher, text_hasher) for item in items]
    texts = {p.context_id: item.text for p, item in zip(proposals, items, strict=True)}
    appended = await store.append(proposals, texts=texts if capture_text else None)
    telemetry.note_on_span([a.record for a in appended])
    return [
        Context(a.record.context_id, item.text, list(a.record.parent_ids), a.record, a.spooled)
        for item, a in zip(items, appended, strict=True)
    ]


async def derive(
    store: Store,
    parents: Sequence["Context | str"],
    text: str,
    kind: str,
    transform: str | None = None,
    version: str | None = None,
    produced_by: str | None = None,
    index_snapshot: str | None = None,
    source_uri: str | None = None,
    trace_id: str | None = None,
    attributes: dict[str, Any] | None = None,
    *,
    context_id: str | None = None,
    deterministic: bool = False,
    hasher: ContentHasher | None = None,
) -> Context:
    """Record one unit of context derived from `parents` and return it, text included.

    Raises InvalidRecord (naming the rule) or Conflict, with nothing written.
    """
    item = Derivation(
        parents=parents,
        text=text,
        kind=kind,
        transform=transform,
        version=version,
        produced_by=produced_by,
        index_snapshot=index_snapshot,
        source_uri=source_uri,
        trace_id=trace_id,
        attributes={} if attributes is None else attributes,
        context_id=context_id,
        deterministic=deterministic,
    )
    [context] = await derive_many(store, [item], hasher)
    return context


def render_for_prompt(contexts: Sequence[Context]) -> str:
    """Every block the model sees carries its id, so its citations can be checked."""
    blocks = []
    for context in contexts:
        # A block's own text must not be able to close it early.
        body = context.text.replace("</context", "&lt;/context")
        blocks.append(f'<context id="{context.context_id}">\n{body}\n</context>')
    return "\n".join(blocks)
