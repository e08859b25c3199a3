"""Root sources: for each record, the source_uris of the roots it derives from and its minimal
depth below a root of each.

Derived from parent_ids alone and kept outside the signed canonical form: on the record itself
(`root_sources`, `root_depths`: what a child's append carries down, each source by the number
of its key in `invalidation_keys` since migration 0038; NULL for a record inserted around the
append) and listed by source in `invalidation_postings` under the key `source:`
and the source_uri (migration 0036), so the blast radius of a document by source_uri is one
index range instead of a walk (sql/include/source_radius.sql).
"""

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from lineage.core.record import ContextRecord
from lineage.db.database import Transaction

Roots = dict[str, int]  # source_uri -> minimal depth below a root with that source_uri
SOURCE_KEY = "source:"  # a root source's invalidation key: this and its source_uri
KEPT = ("root_sources", "upstream_keys")  # a record's keys, by number (migration 0038)
Carried = TypeVar("Carried")


def carry(parent_roots: Iterable[Mapping[str, int]]) -> Roots:
    """A child's root sources: every one of its parents', a level further down, at the least."""
    roots: Roots = {}
    for inherited in parent_roots:
        for source_uri, depth in inherited.items():
            if source_uri not in roots or depth + 1 < roots[source_uri]:
                roots[source_uri] = depth + 1
    return roots


def roots_of(record: ContextRecord, parent_roots: Sequence[Mapping[str, int]]) -> Roots:
    """A root (no parents; it always has a source_uri) is its own source at depth 0."""
    if not record.parent_ids:
        return {str(record.source_uri): 0}
    return carry(parent_roots)


@dataclass(frozen=True)
class StoredParent:
    """A stored record as a child's append needs it: its root sources and its postings."""

    roots: Roots
    postings: dict[str, int] | None  # lineage.services.postings.Postings


async def stored_parents(tx: Transaction, context_ids: Collection[str]) -> dict[str, StoredParent]:
    """The tenant's stored records among `context_ids`, each with its root sources (a record
    inserted around append_records has none) and postings. Unknown and foreign ids are simply
    absent."""
    rows = await tx.fetch("stored_parents", context_ids=list(context_ids))
    numbers = {n for row in rows for column in KEPT for n in row[column] or []}
    named = await tx.fetch("key_names", key_nos=sorted(numbers)) if numbers else []
    names = {name["key_no"]: name["key"] for name in named}
    found = {}
    for row in rows:
        sources = [names[n].removeprefix(SOURCE_KEY) for n in row["root_sources"] or []]
        keys = None if row["upstream_keys"] is None else [names[n] for n in row["upstream_keys"]]
        found[row["context_id"]] = StoredParent(
            dict(zip(sources, row["root_depths"] or [], strict=True)),
            None if keys is None else dict(zip(keys, row["upstream_depths"], strict=True)),
        )
    return found


def down_the_batch(
    records: Sequence[ContextRecord],
    known_parents: Mapping[str, Carried],
    of: Callable[[ContextRecord, list[Carried]], Carried],
    unknown: Carried,
) -> list[Carried]:
    """What `of` makes of each record of a batch (in batch order) from its parents': earlier
    in the batch, in `known_parents`, or else `unknown`."""
    known = dict(known_parents)
    found = []
    for record in records:
        carried = known[record.context_id] = of(
            record, [known.get(p, unknown) for p in record.parent_ids]
        )
        found.append(carried)
    return found


def batch_roots(records: Sequence[ContextRecord], parent_roots: Mapping[str, Roots]) -> list[Roots]:
    """The root sources of each record of a batch (in batch order), from those of its parents:
    earlier in the batch or in `parent_roots` (stored or expired parents). Every stored record
    has its roots (migrations 0005 and 0036 gave older ones theirs)."""
    return down_the_batch(records, parent_roots, roots_of, {})
