"""Invalidation postings: for each record, the keys a migration invalidates by (its transform
version and index snapshot, and those of every record upstream of it), each with its least
depth below a record that has it. The append computes a record's from its parents' postings
and stores them beside it (`upstream_keys`, `upstream_depths`) and, listed by key, kind and
depth, in `invalidation_postings` (b-tree indexed), so what depends on an old chunker or index
snapshot is one index read (sql/invalidate_*), not a walk.

None means unknown: a record imported with parents retention had dropped, and anything below
one (migration 0032 gave records stored before 0028 theirs, computed alike in SQL). A tenant
with any is answered by the walk."""

from collections.abc import Iterable, Mapping, Sequence

from lineage.core.record import ContextRecord
from lineage.services.root_sources import carry, down_the_batch

Postings = dict[str, int] | None  # key -> least depth below a record with that key

TRANSFORM_VERSION = "transform_version:"
INDEX_SNAPSHOT = "index_snapshot:"


def own_keys(transform_version: str | None, index_snapshot: str | None) -> list[str]:
    """The keys a record is invalidated by itself (at depth 0)."""
    keys = []
    if transform_version:
        keys.append(TRANSFORM_VERSION + transform_version)
    if index_snapshot:
        keys.append(INDEX_SNAPSHOT + index_snapshot)
    return keys


def derived(keys: Iterable[str], parents: Sequence[Postings]) -> Postings:
    """Every parent's postings a level further down, at the least, and `keys` at depth 0."""
    known = [parent for parent in parents if parent is not None]
    if len(known) < len(parents):
        return None
    postings = carry(known)
    for key in keys:
        postings[key] = 0
    return postings


def postings_of(record: ContextRecord, parents: Sequence[Postings]) -> Postings:
    return derived(own_keys(record.transform_version, record.index_snapshot), parents)


def batch_postings(
    records: Sequence[ContextRecord], parent_postings: Mapping[str, Postings]
) -> list[Postings]:
    """The postings of each record of a batch (in batch order), its parents earlier in the
    batch or in `parent_postings`; a parent in neither is unknown."""
    return down_the_batch(records, parent_postings, postings_of, None)


def array_literals(postings: Sequence[Postings]) -> tuple[list[str | None], list[str | None]]:
    """lineage_append's upstream keys or root sources and their depths, one array literal per
    record (keys are quoted: a transform version or a source_uri may hold a comma or a brace)."""
    keys: list[str | None] = []
    depths: list[str | None] = []
    for each in postings:
        if each is None:
            keys.append(None)
            depths.append(None)
            continue
        ordered = sorted(each.items())
        keys.append("{" + ",".join(_quoted(key) for key, _ in ordered) + "}")
        depths.append("{" + ",".join(str(depth) for _, depth in ordered) + "}")
    return keys, depths


def _quoted(element: str) -> str:
    return '"' + element.replace("\\", "\\\\").replace('"', '\\"') + '"'
