"""The export bundle: one tenant's records, proved complete and unaltered by its signed checkpoint.

A bundle is UTF-8 text, one JSON object a line, read and written a line at a time:

    {"bundle": "lineage-tenant", "version": 2, "tenant_id": ..., "checkpoint": <signed note>,
     "records": N, "texts": true|false, "verifier_key": ..., "settings": {...}, ...}   header
    {"leaf_index": 0, "leaf_hash": <b64>, "signature": {...}|null, "record": {...}}   a kept leaf
    {"leaf_index": 1, "leaf_hash": <b64>, "expired": {"context_id": ...,
     "has_kept_children": true|false, "root_sources": {uri: depth}}}                an expired one
    {"leaf_index": 2, "leaf_hash": <b64>, "expired": {...}, "signature": {...}|null,
     "tombstone": {...}}                                           an expired forget tombstone
    {"text": {"context_id": ..., "text": ..., "captured_at": ...}}                   if asked
    {"end": {"records": N, "texts": M, "expired": E}, "expiry": <signed note>|null}  trailer

Leaf lines come in leaf order, the log's first N leaves, N the checkpoint's tree size. A kept
leaf's `record` is the record's canonical form (RFC 8785, `lineage.core.record`) byte for byte.
A reader recomputes each kept leaf's hash from its record, folds the leaves into the Merkle root
keeping only the tree's frontier (O(log N) hashes), and accepts the bundle only if that root and
size are the checkpoint's, whose signature it checks with a verifier key it trusts: a record
missing, added, reordered or altered changes the root. The verifier key in the header says
which key signed; it is never what a reader trusts. Captured text is not in the tree: the FK to
its record and the record's content hash are what vouch for it.

A leaf whose record retention dropped before the export is carried as its hash only: the root
still proves it is the log's leaf, but not what the record said. Which leaves are expired is
stated by the trailer's expiry note, signed by the checkpoint's key (`ExpiredLeaves.text`, with
the time before which the tenant's records expired): a record line swapped for an expired line
with the same hash does not match it. An expired record that kept ones name as a parent
carries root sources (`root_sources`, derived, in no record): those that give its kept children
the root sources they have in the exported tenant, so blast radius by source_uri finds them
after an import as it does there; the expiry note covers them too. A forget tombstone, which
retention keeps past the period (forget_tombstones), is carried whole beside its expired line, its
canonical form hashing to the leaf, so the document stays forgotten where the bundle is imported.
Version 2 bundles (expired
leaves without root sources) and version 1 bundles (no expired leaves, no `expired` counts) are
still read.
"""

import base64
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, Final

from lineage.core.errors import BundleError
from lineage.core.record import CANONICAL_VERSION, ContextRecord
from lineage.verifiable_log import merkle
from lineage.verifiable_log.checkpoint import Checkpoint, VerifierKey

FORMAT: Final = "lineage-tenant"
VERSION: Final = 3
READABLE: Final = (1, 2, 3)  # the versions this reader reads
SETTINGS: Final = ("capture_source_text", "capture_query_text", "capture_answer_text")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: Any, what: str) -> bytes:
    try:
        return base64.b64decode(str(text), validate=True)
    except ValueError as exc:
        raise BundleError(f"{what} is not base64") from exc


@dataclass(frozen=True)
class Header:
    tenant_id: str
    checkpoint_note: str
    records: int
    texts: bool
    settings: dict[str, Any]  # the capture switches and text_hash_key (base64)
    version: int = VERSION

    def line(self, verifier_key: str, exported_at: datetime) -> bytes:
        return _line(
            {
                "bundle": FORMAT,
                "version": VERSION,
                "tenant_id": self.tenant_id,
                "exported_at": exported_at.isoformat(),
                "records": self.records,
                "texts": self.texts,
                "checkpoint": self.checkpoint_note,
                "verifier_key": verifier_key,
                "canonical_form": f"RFC 8785 over the record's fields, v {CANONICAL_VERSION}",
                "leaf_hash": "RFC 6962: SHA-256(0x00 || canonical form)",
                "settings": self.settings,
            }
        )


def record_line(leaf_index: int, leaf_hash: bytes, signature: Any, canonical: bytes) -> bytes:
    """A record line with the canonical form written verbatim."""
    head = json.dumps(
        {"leaf_index": leaf_index, "leaf_hash": b64(leaf_hash), "signature": signature}
    )
    return head[:-1].encode() + b', "record": ' + canonical + b"}\n"


def expired_line(
    leaf_index: int,
    leaf_hash: bytes,
    context_id: str,
    has_kept_children: bool,
    root_sources: Mapping[str, int],
    tombstone: tuple[Any, bytes] | None = None,
) -> bytes:
    """`tombstone`: a forget tombstone's signature and canonical form, written verbatim."""
    expired = {
        "context_id": context_id,
        "has_kept_children": has_kept_children,
        "root_sources": root_sources,
    }
    line = _line({"leaf_index": leaf_index, "leaf_hash": b64(leaf_hash), "expired": expired})
    if tombstone is None:
        return line
    signature, canonical = tombstone
    extra = f', "signature": {json.dumps(signature)}, "tombstone": '.encode()
    return line[:-2] + extra + canonical + b"}\n"


def text_line(context_id: str, text: str, captured_at: datetime) -> bytes:
    return _line(
        {"text": {"context_id": context_id, "text": text, "captured_at": captured_at.isoformat()}}
    )


def end_line(records: int, texts: int, expired: int, expiry_note: str | None) -> bytes:
    return _line(
        {"end": {"records": records, "texts": texts, "expired": expired}, "expiry": expiry_note}
    )


class ExpiredLeaves:
    """The leaves a bundle carries as hashes only, folded into the text of its expiry note:
    the checkpoint, their count and a SHA-256 over their indexes, ids and (from version 3)
    root sources and forget tombstones, in leaf order."""

    def __init__(self) -> None:
        self.count = 0
        self._digest = hashlib.sha256()

    def add(
        self,
        leaf_index: int,
        context_id: str,
        root_sources: Mapping[str, int] | None,
        *,
        tombstone: bool = False,
    ) -> None:
        """`root_sources` None: a version 2 bundle's leaf, which has none."""
        self.count += 1
        roots = "" if root_sources is None else " " + json.dumps(root_sources, sort_keys=True)
        whole = " tombstone" if tombstone else ""
        self._digest.update(f"{leaf_index} {context_id}{roots}{whole}\n".encode())

    def text(self, checkpoint: Checkpoint, expired_before: datetime | None) -> str:
        """The note text the checkpoint's key signs (its first line tells it from a
        checkpoint's)."""
        return (
            f"lineage bundle expiry\n{checkpoint.origin}\n{checkpoint.tree_size}\n"
            f"{b64(checkpoint.root_hash)}\nexpired {self.count}\n"
            f"leaves {self._digest.hexdigest()}\n"
            f"before {'-' if expired_before is None else expired_before.isoformat()}\n"
        )


def _line(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode() + b"\n"


@dataclass(frozen=True)
class BundleRecord:
    leaf_index: int
    record: ContextRecord
    leaf_hash: bytes
    signature: dict[str, str] | None


@dataclass(frozen=True)
class BundleExpired:
    """A leaf whose record retention dropped before the export: its hash, no record."""

    leaf_index: int
    leaf_hash: bytes
    context_id: str
    has_kept_children: bool  # a kept record names it as a parent
    root_sources: dict[str, int]  # what its kept children inherit from it (none before v3)
    tombstone: BundleRecord | None = None  # a forget tombstone, kept past retention


@dataclass(frozen=True)
class BundleEnd:
    """The trailer, checked: the leaves carried as hashes only, and the time before which
    retention had dropped the tenant's records (None: it dropped none)."""

    expired: int
    expired_before: datetime | None


@dataclass(frozen=True)
class BundleText:
    context_id: str
    text: str
    captured_at: datetime


Entry = BundleRecord | BundleExpired | BundleText | BundleEnd  # a line after the header, read


@dataclass
class Verified:
    """What a complete read of a bundle established."""

    header: Header
    checkpoint: Checkpoint
    records: int = 0  # kept records, written by an import
    expired: int = 0  # leaves carried as hashes only
    texts: int = 0
    signatures_checked: int = 0
    signatures_unchecked: int = 0  # signed under a key this keyring lacks
    unsigned: int = 0
    tombstones: int = 0  # forget tombstones retention dropped, carried whole
    kinds: dict[str, int] = field(default_factory=dict)
    # Expired records that kept ones name as parents, with the root sources they pass on: an
    # import accepts them as parents.
    expired_parents: dict[str, dict[str, int]] = field(default_factory=dict)
    expired_before: datetime | None = None  # retention had dropped the records created before


def _parse(raw: bytes, number: int) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise BundleError(f"line {number} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise BundleError(f"line {number} is not a JSON object")
    return value


def read_header(stream: IO[bytes], verifier: VerifierKey) -> tuple[Header, Checkpoint]:
    """The header, its checkpoint's signature checked with `verifier`."""
    first = stream.readline()
    if not first:
        raise BundleError("the bundle is empty")
    value = _parse(first, 1)
    version = value.get("version")
    if value.get("bundle") != FORMAT or version not in READABLE:
        raise BundleError(
            f"not a {FORMAT} bundle of version {' or '.join(map(str, READABLE))} (line 1)"
        )
    try:
        header = Header(
            tenant_id=str(value["tenant_id"]),
            checkpoint_note=str(value["checkpoint"]),
            records=int(value["records"]),
            texts=bool(value["texts"]),
            settings=dict(value["settings"]),
            version=int(version),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"the header lacks or mangles {exc}") from exc
    checkpoint = verifier.open(header.checkpoint_note)  # CheckpointError if not signed by it
    if checkpoint.tenant_id != header.tenant_id:
        raise BundleError(
            f"the checkpoint is of tenant {checkpoint.tenant_id}, the header says "
            f"{header.tenant_id}"
        )
    if checkpoint.tree_size != header.records:
        raise BundleError(
            f"the header lists {header.records} records but its checkpoint covers "
            f"{checkpoint.tree_size}"
        )
    return header, checkpoint


def _record(
    value: dict[str, Any], number: int, header: Header, key: str = "record"
) -> BundleRecord:
    """The record under `key` of a leaf line (a kept record; an expired line's tombstone)."""
    try:
        fields = dict(value[key])
        if fields.pop("v", None) != CANONICAL_VERSION:
            raise BundleError(
                f"line {number}: the record is not canonical form v{CANONICAL_VERSION}"
            )
        fields["created_at"] = datetime.fromisoformat(fields["created_at"])
        record = ContextRecord(**fields)
        entry = BundleRecord(
            leaf_index=int(value["leaf_index"]),
            record=record,
            leaf_hash=unb64(value["leaf_hash"], f"line {number}: leaf_hash"),
            signature=value["signature"],
        )
    except BundleError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"line {number}: a malformed record line ({exc})") from exc
    if record.tenant_id != header.tenant_id:
        raise BundleError(
            f"line {number}: record {record.context_id} is of tenant {record.tenant_id}, "
            f"not {header.tenant_id}"
        )
    return entry


def _expired(value: dict[str, Any], number: int, header: Header) -> BundleExpired:
    try:
        expired = value["expired"]
        roots = dict(expired["root_sources"]) if header.version >= 3 else {}
        if not all(type(depth) is int and depth >= 0 for depth in roots.values()):
            raise ValueError(f"root source depths {roots} are not whole numbers >= 0")
        entry = BundleExpired(
            leaf_index=int(value["leaf_index"]),
            leaf_hash=unb64(value["leaf_hash"], f"line {number}: leaf_hash"),
            context_id=str(expired["context_id"]),
            has_kept_children=bool(expired["has_kept_children"]),
            root_sources={str(source): depth for source, depth in roots.items()},
            tombstone=_record(value, number, header, "tombstone") if "tombstone" in value else None,
        )
    except BundleError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"line {number}: a malformed expired leaf line ({exc})") from exc
    whole = entry.tombstone
    if whole is not None and (whole.record.kind, whole.record.context_id) != (
        "tombstone",
        entry.context_id,
    ):
        raise BundleError(
            f"line {number}: expired record {entry.context_id} carries record "
            f"{whole.record.context_id} of kind {whole.record.kind}: an expired line carries "
            "only its own forget tombstone"
        )
    return entry


def _check_expiry(
    value: dict[str, Any], expired: ExpiredLeaves, checkpoint: Checkpoint, verifier: VerifierKey
) -> BundleEnd:
    """The trailer's expiry note, signed by the checkpoint's key, names the expired leaves read."""
    note = value.get("expiry")
    if note is None:
        if expired.count:
            raise BundleError(
                f"the bundle carries {expired.count} expired leaves without an expiry note "
                "signed by the checkpoint's key: records are missing"
            )
        return BundleEnd(0, None)
    signed = verifier.verified_text(str(note))  # CheckpointError if not signed by it
    before = signed.rstrip("\n").rpartition("\nbefore ")[2]
    try:
        expired_before = None if before == "-" else datetime.fromisoformat(before)
    except ValueError as exc:
        raise BundleError(f"the expiry note's time {before!r} is not a time") from exc
    if signed != expired.text(checkpoint, expired_before):
        raise BundleError(
            "the expiry note, signed by the checkpoint's key, does not name the "
            f"{expired.count} expired leaves read: records are missing or were swapped for "
            "leaf hashes"
        )
    return BundleEnd(expired.count, expired_before)


def _leaf(
    value: dict[str, Any], number: int, header: Header, expected: int
) -> BundleRecord | BundleExpired:
    """A leaf line, at its place in leaf order; a record it carries hashing to its leaf."""
    entry: BundleRecord | BundleExpired
    if "record" in value:
        entry = _record(value, number, header)
        what = f"record {entry.record.context_id}"
    else:
        entry = _expired(value, number, header)
        what = f"expired record {entry.context_id}"
    if entry.leaf_index != expected:
        raise BundleError(
            f"line {number}: {what} is leaf {entry.leaf_index}, expected leaf {expected}: "
            "records are missing or out of order"
        )
    whole = entry if isinstance(entry, BundleRecord) else entry.tombstone
    if whole is not None and merkle.leaf_hash(whole.record.canonical_bytes()) != entry.leaf_hash:
        raise BundleError(
            f"line {number}: {what} (leaf {expected}) was altered: its canonical form "
            "does not hash to the log's leaf"
        )
    return entry


def entries(
    stream: IO[bytes], header: Header, checkpoint: Checkpoint, verifier: VerifierKey
) -> Iterator[Entry]:
    """The leaf and text lines after the header, each checked in itself, then the trailer's
    counts and expiry note against what was read, yielded last; BundleError at the first line
    that is wrong."""
    number, leaves, texts = 1, 0, 0
    expired = ExpiredLeaves()
    for raw in stream:
        number += 1
        value = _parse(raw, number)
        if "record" in value or "expired" in value:
            if texts:
                raise BundleError(f"line {number}: a leaf after the captured texts")
            entry = _leaf(value, number, header, leaves)
            if isinstance(entry, BundleExpired):
                roots = entry.root_sources if header.version >= 3 else None
                tombstone = entry.tombstone is not None
                expired.add(entry.leaf_index, entry.context_id, roots, tombstone=tombstone)
            leaves += 1
            if leaves > header.records:
                raise BundleError(
                    f"line {number}: more records than the {header.records} its checkpoint covers"
                )
            yield entry
        elif "text" in value:
            if not header.texts:
                raise BundleError(f"line {number}: captured text in a bundle made without it")
            try:
                text = value["text"]
                yield BundleText(
                    str(text["context_id"]),
                    str(text["text"]),
                    datetime.fromisoformat(text["captured_at"]),
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise BundleError(f"line {number}: a malformed text line ({exc})") from exc
            texts += 1
        elif "end" in value:
            if next(stream, None) is not None:
                raise BundleError(f"line {number + 1}: lines after the end of the bundle")
            if leaves != header.records:
                raise BundleError(
                    f"the bundle holds {leaves} records but its checkpoint covers "
                    f"{header.records}: records are missing"
                )
            counts = {"records": leaves, "texts": texts}
            if header.version >= 2:
                counts["expired"] = expired.count
            if value["end"] != counts:
                raise BundleError(f"line {number}: the end line does not match what was read")
            yield _check_expiry(value, expired, checkpoint, verifier)
            return
        else:
            raise BundleError(f"line {number}: neither a record, a text nor the end")
    raise BundleError(
        f"the bundle ends after {leaves} records and {texts} texts, without its end line: "
        "it was cut short"
    )


class RootBuilder:
    """The Merkle root of leaves added in order, holding only the tree's frontier."""

    def __init__(self) -> None:
        self.size = 0
        self._frontier: dict[tuple[int, int], bytes] = {}

    def add(self, leaf_hashes: Iterable[bytes]) -> None:
        leaves = list(leaf_hashes)
        made = merkle.completed_subtrees(self._frontier, self.size, leaves)
        known = {**self._frontier, **made}
        self.size += len(leaves)
        self._frontier = {node: known[node] for node in merkle.frontier(self.size)}

    def root(self) -> bytes:
        return merkle.root_from_subtrees(self._frontier, self.size)
