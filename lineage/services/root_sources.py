"""Root sources: for each record, the source_uris of the roots it derives from and its minimal
depth below a root of each.

Derived from parent_ids alone and kept in the side table `root_sources` (a row per record and
source), outside the signed canonical form: with it, the blast radius of a document by
source_uri is one index range instead of a walk (sql/blast_radius_by_source.sql).
"""

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from lineage.core.offload import per_record
from lineage.core.record import ContextRecord
from lineage.db.database import Transaction

Roots = dict[str, int]  # source_uri -> minimal depth below a root with that source_uri


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


async def stored_root_sources(tx: Transaction, context_ids: Collection[str]) -> dict[str, Roots]:
    """The tenant's stored records among `context_ids`, each with its root sources; a record
    inserted around append_records has none. Unknown and foreign ids are simply absent."""
    stored: dict[str, Roots] = {}
    for row in await tx.fetch("stored_root_sources", context_ids=list(context_ids)):
        roots = stored.setdefault(row["context_id"], {})
        if row["source_uri"] is not None:
            roots[row["source_uri"]] = row["depth"]
    return stored


async def note_root_sources(
    tx: Transaction,
    new: Sequence[ContextRecord],
    stored: Mapping[str, Roots],
) -> None:
    """Record the root sources of the records this transaction inserted (`new`, in batch
    order), in the caller's transaction.

    `stored` holds the root sources of stored parents, read before the insert; those of a
    parent the batch repeats (stored before it, so not inserted) are read here.
    """
    if not new:
        return
    outside = {p for record in new for p in record.parent_ids} - {r.context_id for r in new}
    known = {p: stored[p] for p in outside if p in stored}
    if unread := outside - known.keys():
        known |= await stored_root_sources(tx, unread)
    columns = await per_record(len(new), _root_columns, new, known)
    await tx.execute("record_root_sources", **columns)


def _root_columns(new: Sequence[ContextRecord], known: dict[str, Roots]) -> dict[str, list[Any]]:
    """record_root_sources' arguments, `known` growing by each new record's roots."""
    # One list per column, not a tuple per row: a batch has about five rows a record.
    context_ids: list[str] = []
    kinds: list[str] = []
    source_uris: list[str] = []
    depths: list[int] = []
    created_ats: list[datetime] = []
    for record in new:
        # Every stored record has its rows (migration 0005 filled those before it).
        parents = [known.get(p, {}) for p in record.parent_ids]
        roots = known[record.context_id] = roots_of(record, parents)
        context_ids += [record.context_id] * len(roots)
        kinds += [record.kind] * len(roots)
        source_uris += roots.keys()
        depths += roots.values()
        created_ats += [record.created_at] * len(roots)
    return {
        "context_ids": context_ids,
        "kinds": kinds,
        "source_uris": source_uris,
        "depths": depths,
        "created_ats": created_ats,
    }
