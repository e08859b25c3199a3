"""Invalidation postings: for each record, the keys a migration invalidates by (its transform
version and index snapshot, and those of every record upstream of it), each with its least
depth below a record that has it. The append computes a record's from its parents' postings
and stores them beside it (`upstream_keys`, `upstream_depths`) and, listed by key, kind and
depth, in `invalidation_postings` (b-tree indexed), so what depends on an old chunker or index
snapshot is one index read (sql/invalidate_*), not a walk.

None means unknown: a record imported with parents retention had dropped, and anything below
one (migration 0032 gave records stored before 0028 theirs, computed alike in SQL). A tenant
with any is answered by the walk."""

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from lineage.core.record import ContextRecord
from lineage.services.root_sources import SOURCE_KEY, Roots, carry, down_the_batch

Postings = dict[str, int] | None  # key -> least depth below a record with that key

TRANSFORM_VERSION = "transform_version:"
INDEX_SNAPSHOT = "index_snapshot:"
# An id kept in 16 bytes as uuid: exactly how uuid prints one, so it reads back unchanged.
UUID_FORM = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
IDS_A_ROW = 1000  # a postings row's ids of each form
# lineage_append's arguments that append_arguments makes: a record's keys, and the postings.
LISTED = ("upstream_key_lists", "upstream_depth_lists", "root_source_lists", "root_depth_lists")
POSTING_ROWS = (
    "posting_keys", "posting_kinds", "posting_depths", "posting_created_ats",
    "posting_uuid_lists", "posting_id_lists",
)  # fmt: skip


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


def append_arguments(
    records: Sequence[ContextRecord], roots: Sequence[Roots], postings: Sequence[Postings]
) -> dict[str, list[Any]]:
    """lineage_append's keys and postings for a batch (`roots` and `postings` in batch order):
    the batch's keys, each once; each record's upstream keys and root sources as 1-based
    positions in them with their depths (array literals, in key order; None when unknown); each
    id's form (a UUID as uuid prints it, or text); and the postings, grouped by key, kind, depth
    and UTC month."""
    keys: list[str] = []
    numbers: dict[str, dict[str, int]] = {"": {}, SOURCE_KEY: {}}  # by prefix, key -> position
    months: dict[datetime, tuple[int, int]] = {}
    # By kind and month, then by key position and depth: the records' indexes.
    groups: dict[tuple[str, tuple[int, int]], defaultdict[tuple[int, int], list[int]]] = {}
    lists: dict[str, list[str | None]] = {name: [] for name in LISTED}
    for index, (record, its_roots, its_postings) in enumerate(
        zip(records, roots, postings, strict=True)
    ):
        if record.created_at not in months:
            at = record.created_at.astimezone(UTC)
            months[record.created_at] = (at.year, at.month)
        group = groups.setdefault((record.kind, months[record.created_at]), defaultdict(list))
        for keyed, prefix, (keys_name, depths_name) in (
            (its_postings, "", LISTED[:2]),
            (its_roots, SOURCE_KEY, LISTED[2:]),
        ):
            if keyed is None:
                lists[keys_name].append(None)
                lists[depths_name].append(None)
                continue
            numbered = numbers[prefix]
            positions: list[int] = []
            depths: list[int] = []
            for key, depth in sorted(keyed.items()):
                position = numbered.get(key)
                if position is None:
                    keys.append(prefix + key)
                    position = numbered[key] = len(keys)
                positions.append(position)
                depths.append(depth)
                group[position, depth].append(index)
            lists[keys_name].append(_bare_literal(positions))
            lists[depths_name].append(_bare_literal(depths))
    is_uuids = [UUID_FORM.fullmatch(record.context_id) is not None for record in records]
    return {
        "is_uuids": is_uuids, "keys": keys, **lists, **_posting_rows(records, is_uuids, groups)
    }  # fmt: skip


def _posting_rows(
    records: Sequence[ContextRecord],
    is_uuids: Sequence[bool],
    groups: Mapping[tuple[str, tuple[int, int]], Mapping[tuple[int, int], list[int]]],
) -> dict[str, list[Any]]:
    """Each group's rows (records' indexes by kind and month, then by key position and depth):
    at most IDS_A_ROW ids of each form a row, in id order, dated by the group's earliest."""
    rows: dict[str, list[Any]] = {name: [] for name in POSTING_ROWS}
    for (kind, _), by_key in groups.items():
        for (position, depth), members in by_key.items():
            uuids: list[str] = []
            others: list[str] = []
            for i in members:
                (uuids if is_uuids[i] else others).append(records[i].context_id)
            uuids.sort()
            others.sort()
            created_at = min(records[i].created_at for i in members)
            for first in range(0, max(len(uuids), len(others)), IDS_A_ROW):
                some_uuids = uuids[first : first + IDS_A_ROW]
                some_others = others[first : first + IDS_A_ROW]
                rows["posting_keys"].append(position)
                rows["posting_kinds"].append(kind)
                rows["posting_depths"].append(depth)
                rows["posting_created_ats"].append(created_at)
                rows["posting_uuid_lists"].append(_bare_literal(some_uuids) if some_uuids else None)
                rows["posting_id_lists"].append(id_literal(some_others) if some_others else None)
    return rows


def id_literal(ids: Sequence[str]) -> str:
    """A PostgreSQL array literal of ids (they match record.ID_PATTERN: no quote, backslash,
    comma or brace to escape)."""
    return '{"' + '","'.join(ids) + '"}' if ids else "{}"


def _bare_literal(elements: Iterable[object]) -> str:
    """A PostgreSQL array literal of elements whose text needs no quotes (numbers, UUIDs)."""
    return "{" + ",".join(map(str, elements)) + "}"
