"""The export bundle: one tenant's records, proved complete and unaltered by its signed checkpoint.

A bundle is UTF-8 text, one JSON object a line, read and written a line at a time:

    {"bundle": "lineage-tenant", "version": 1, "tenant_id": ..., "checkpoint": <signed note>,
     "records": N, "texts": true|false, "verifier_key": ..., "settings": {...}, ...}   header
    {"leaf_index": 0, "leaf_hash": <b64>, "signature": {...}|null, "record": {...}}   N lines
    {"text": {"context_id": ..., "text": ..., "captured_at": ...}}                   if asked
    {"end": {"records": N, "texts": M}}                                              trailer

Record lines come in leaf order, the records of the log's first N leaves, N the checkpoint's
tree size; `record` is the record's canonical form (RFC 8785, `lineage.core.record`) byte for
byte. A reader recomputes each leaf hash from the record, folds the leaves into the Merkle root
keeping only the tree's frontier (O(log N) hashes), and accepts the bundle only if that root and
size are the checkpoint's, whose signature it checks with a verifier key it trusts: a record
missing, added, reordered or altered changes the root. The verifier key in the header says
which key signed; it is never what a reader trusts. Captured text is not in the tree: the FK to
its record and the record's content hash are what vouch for it.
"""

import base64
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
VERSION: Final = 1
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


def text_line(context_id: str, text: str, captured_at: datetime) -> bytes:
    return _line(
        {"text": {"context_id": context_id, "text": text, "captured_at": captured_at.isoformat()}}
    )


def end_line(records: int, texts: int) -> bytes:
    return _line({"end": {"records": records, "texts": texts}})


def _line(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode() + b"\n"


@dataclass(frozen=True)
class BundleRecord:
    leaf_index: int
    record: ContextRecord
    leaf_hash: bytes
    signature: dict[str, str] | None


@dataclass(frozen=True)
class BundleText:
    context_id: str
    text: str
    captured_at: datetime


@dataclass
class Verified:
    """What a complete read of a bundle established."""

    header: Header
    checkpoint: Checkpoint
    records: int = 0
    texts: int = 0
    signatures_checked: int = 0
    signatures_unchecked: int = 0  # signed under a key this keyring lacks
    unsigned: int = 0
    kinds: dict[str, int] = field(default_factory=dict)


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
    if value.get("bundle") != FORMAT or value.get("version") != VERSION:
        raise BundleError(f"not a {FORMAT} bundle of version {VERSION} (line 1)")
    try:
        header = Header(
            tenant_id=str(value["tenant_id"]),
            checkpoint_note=str(value["checkpoint"]),
            records=int(value["records"]),
            texts=bool(value["texts"]),
            settings=dict(value["settings"]),
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


def _record(value: dict[str, Any], number: int, header: Header) -> BundleRecord:
    try:
        fields = dict(value["record"])
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


def entries(stream: IO[bytes], header: Header) -> Iterator[BundleRecord | BundleText]:
    """The record and text lines after the header, each checked in itself, then the trailer's
    counts against what was read; BundleError at the first line that is wrong."""
    number, records, texts = 1, 0, 0
    for raw in stream:
        number += 1
        value = _parse(raw, number)
        if "record" in value:
            if texts:
                raise BundleError(f"line {number}: a record after the captured texts")
            entry = _record(value, number, header)
            if entry.leaf_index != records:
                raise BundleError(
                    f"line {number}: record {entry.record.context_id} is leaf "
                    f"{entry.leaf_index}, expected leaf {records}: records are missing or "
                    "out of order"
                )
            computed = merkle.leaf_hash(entry.record.canonical_bytes())
            if computed != entry.leaf_hash:
                raise BundleError(
                    f"line {number}: record {entry.record.context_id} (leaf {records}) was "
                    "altered: its canonical form does not hash to the log's leaf"
                )
            records += 1
            if records > header.records:
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
            if records != header.records:
                raise BundleError(
                    f"the bundle holds {records} records but its checkpoint covers "
                    f"{header.records}: records are missing"
                )
            if value["end"] != {"records": records, "texts": texts}:
                raise BundleError(f"line {number}: the end line does not match what was read")
            return
        else:
            raise BundleError(f"line {number}: neither a record, a text nor the end")
    raise BundleError(
        f"the bundle ends after {records} records and {texts} texts, without its end line: "
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
