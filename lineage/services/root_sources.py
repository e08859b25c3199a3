"""Root sources: for each record, the source_uris of the roots it derives from and its minimal
depth below a root of each.

Derived from parent_ids alone and kept in the side table `root_sources` (a row per record and
source), outside the signed canonical form: with it, the blast radius of a document by
source_uri is one index range instead of a walk (sql/blast_radius_by_source.sql).
"""

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class StoredParent:
    """A stored record as a child's append needs it: its root sources and its postings."""

    roots: Roots
    postings: dict[str, int] | None  # lineage.services.postings.Postings


async def stored_parents(tx: Transaction, context_ids: Collection[str]) -> dict[str, StoredParent]:
    """The tenant's stored records among `context_ids`, each with its root sources (a record
    inserted around append_records has none) and postings. Unknown and foreign ids are simply
    absent."""
    roots: dict[str, Roots] = {}
    postings: dict[str, dict[str, int] | None] = {}
    for row in await tx.fetch("stored_parents", context_ids=list(context_ids)):
        found = roots.setdefault(row["context_id"], {})
        if row["source_uri"] is not None:
            found[row["source_uri"]] = row["depth"]
        keys, depths = row["upstream_keys"], row["upstream_depths"]
        postings[row["context_id"]] = None if keys is None else dict(zip(keys, depths, strict=True))
    return {key: StoredParent(roots[key], postings[key]) for key in roots}


@dataclass
class RootRows:
    """Root sources as lineage_append takes them: a row per record (its place in the batch,
    from 1) and source."""

    records: list[int] = field(default_factory=list)
    source_uris: list[str] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)


def root_rows(records: Sequence[ContextRecord], parent_roots: Mapping[str, Roots]) -> RootRows:
    """The root sources of each record of a batch (in batch order), from those of its parents:
    earlier in the batch or in `parent_roots` (stored or expired parents)."""
    known = dict(parent_roots)
    rows = RootRows()
    for place, record in enumerate(records, start=1):
        # Every stored record has its rows (migration 0005 filled those before it).
        parents = [known.get(p, {}) for p in record.parent_ids]
        roots = known[record.context_id] = roots_of(record, parents)
        rows.records += [place] * len(roots)
        rows.source_uris += roots.keys()
        rows.depths += roots.values()
    return rows
