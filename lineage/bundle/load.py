"""Importing a bundle into a tenant: every record verified against the bundle's signed
checkpoint before anything is written, then written in one transaction, all or nothing.

Two reads of the file, a few batches of records in memory at a time. The first checks
everything (`check_bundle`): the checkpoint's signature, each record's leaf hash, the Merkle
root and size, the signatures this keyring can check. The second writes, hashing again as it
goes (in a thread, a batch ahead of the database), and commits only if it read the same root,
so a file changed between the two reads writes nothing.
Records keep their ids, fields and times; under another tenant name their canonical form (which
holds the tenant) changes, so they are signed again by this service and logged afresh. Leaves
whose records retention dropped before the export are verified as leaves of the checkpoint's
tree but written nowhere (but for forget tombstones, which go where retention keeps them): the
imported tenant's log holds its kept records, its expiry horizon is the bundle's, and a kept
record may name an expired one as its parent.
"""

import asyncio
import time
from collections.abc import AsyncGenerator, Iterator, Mapping
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

from lineage.bundle import format as bundle
from lineage.core.errors import BadParameter, BundleError, Conflict, UnknownSigningKey
from lineage.core.progress import Progress, unwatched
from lineage.core.record import ContextRecord, check_batch, check_id
from lineage.db import keyring
from lineage.db.database import Database, Transaction
from lineage.services import audit
from lineage.services.appends import insert_records
from lineage.services.auth import Caller
from lineage.services.root_sources import Roots, stored_parents
from lineage.settings import Settings
from lineage.verifiable_log import storage
from lineage.verifiable_log.checkpoint import VerifierKey

BATCH_RECORDS = 1000  # records per insert while importing: bounds the import's memory


@dataclass(frozen=True)
class Imported:
    verified: bundle.Verified
    tenant_id: str
    tree_size: int  # of the imported tenant's log, once sequenced
    root_hash: bytes
    seconds: dict[str, float]  # verify, write, log: where the time went


@contextmanager
def _opened(path: Path) -> Iterator[IO[bytes]]:
    try:
        with path.open("rb") as stream:
            yield stream
    except OSError as exc:
        raise BadParameter(f"cannot read the bundle {path}: {exc}") from exc


def _check_signature(
    entry: bundle.BundleRecord, signer: keyring.Signer | None, verified: bundle.Verified
) -> None:
    if entry.signature is None:
        verified.unsigned += 1
        return
    if signer is None:
        verified.signatures_unchecked += 1
        return
    key_id = str(entry.signature["key_id"])
    signature = bundle.unb64(entry.signature["signature"], f"leaf {entry.leaf_index}: signature")
    try:
        ok = signer.verify(key_id, entry.record.canonical_bytes(), signature)
    except UnknownSigningKey:
        verified.signatures_unchecked += 1
        return
    if not ok:
        raise BundleError(
            f"record {entry.record.context_id} (leaf {entry.leaf_index}) does not match its "
            f"signature under key {key_id}: it was altered"
        )
    verified.signatures_checked += 1


def check_bundle(
    path: Path,
    verifier: VerifierKey,
    signer: keyring.Signer | None,
    progress: Progress = unwatched,
) -> bundle.Verified:
    """Read the whole bundle and prove it complete and unaltered; BundleError (or
    CheckpointError) saying what is wrong otherwise. Writes nothing."""
    with _opened(path) as stream:
        header, checkpoint = bundle.read_header(stream, verifier)
        verified = bundle.Verified(header, checkpoint)
        root = bundle.RootBuilder()
        leaves: list[bytes] = []
        for entry in bundle.entries(stream, header, checkpoint, verifier):
            if isinstance(entry, bundle.BundleText):
                verified.texts += 1
                continue
            if isinstance(entry, bundle.BundleEnd):
                verified.expired_before = entry.expired_before
                continue
            if isinstance(entry, bundle.BundleExpired):
                verified.expired += 1
                if entry.has_kept_children:
                    verified.expired_parents[entry.context_id] = entry.root_sources
                if entry.tombstone is not None:
                    verified.tombstones += 1
                    _check_signature(entry.tombstone, signer, verified)
            else:
                verified.records += 1
                _check_signature(entry, signer, verified)
                kind = entry.record.kind
                verified.kinds[kind] = verified.kinds.get(kind, 0) + 1
            leaves.append(entry.leaf_hash)
            if len(leaves) == BATCH_RECORDS:
                root.add(leaves)
                leaves = []
                progress("verify", root.size, header.records)
        root.add(leaves)
        progress("verify", root.size, header.records)
    _check_root(root, checkpoint.root_hash)
    return verified


def _check_root(root: bundle.RootBuilder, expected: bytes) -> None:
    if root.root() != expected:
        raise BundleError(
            f"the {root.size} records do not hash to the checkpoint's root: records were "
            "altered, reordered, added or removed"
        )


async def import_bundle(
    database: Database,
    settings: Settings,
    path: Path,
    tenant_id: str,
    verifier: VerifierKey,
    progress: Progress = unwatched,
) -> Imported:
    """Check the bundle, then write it into `tenant_id` (created if missing; it must hold no
    records), sequence the tenant's log and sign its checkpoint. As the owner."""
    check_id(tenant_id, "tenant name")
    started = time.perf_counter()
    verified = check_bundle(path, verifier, database.signer, progress)
    seconds = {"verify": time.perf_counter() - started}
    async with database.tenant(tenant_id) as tx:
        await tx.fetch("tenant_create")
        [has] = await tx.fetch("tenant_has_records")
        if has["has_records"]:
            raise Conflict(
                f"tenant {tenant_id} already holds records: import into a new or empty tenant"
            )
        await _write(tx, path, verified, verifier, progress)
    seconds["write"] = time.perf_counter() - started - seconds["verify"]
    progress("sequence the log and sign a checkpoint")
    signed = await storage.checkpoint(database, settings, tenant_id)
    seconds["log"] = time.perf_counter() - started - seconds["verify"] - seconds["write"]
    await audit.record(
        database,
        Caller(tenant_id, None, "admin"),
        "import_bundle",
        str(path),
        {
            "from_tenant": verified.header.tenant_id,
            "records": verified.records,
            "texts": verified.texts,
            "bundle_root_hash": bundle.b64(verified.checkpoint.root_hash),
        },
    )
    checkpoint = signed.checkpoint
    return Imported(verified, tenant_id, checkpoint.tree_size, checkpoint.root_hash, seconds)


async def _write(
    tx: Transaction,
    path: Path,
    verified: bundle.Verified,
    verifier: VerifierKey,
    progress: Progress,
) -> None:
    tenant_id = tx.tenant_id
    settings = verified.header.settings
    text_hash_key = bundle.unb64(settings["text_hash_key"], "settings.text_hash_key")
    updated = await tx.fetch(
        "bundle_import_settings",
        **{name: bool(settings[name]) for name in bundle.SETTINGS},
        text_hash_key=text_hash_key,
    )
    if not updated:
        raise Conflict(
            f"tenant {tenant_id} has no settings row: create it with lineage tenant create"
        )
    await tx.execute("bundle_retire_text_keys", text_hash_key=text_hash_key)
    with _opened(path) as stream:
        header, checkpoint = bundle.read_header(stream, verifier)
        if checkpoint != verified.checkpoint:
            raise BundleError("the bundle changed while it was being imported")
        root = bundle.RootBuilder()
        chunks = _chunks(bundle.entries(stream, header, checkpoint, verifier), root, tenant_id)
        waiting: list[ContextRecord] = []
        written, analyze_at = 0, BATCH_RECORDS
        async with aclosing(_read_ahead(chunks)) as read:
            async for chunk in read:
                await _write_tombstones(tx, chunk.tombstones)
                if chunk.records:
                    waiting = await _write_records(
                        tx, waiting + chunk.records, verified.expired_parents
                    )
                    written += len(chunk.records)
                    progress("write", root.size, header.records)
                    if written >= analyze_at:  # at 1k, 10k, 100k... records: plans fit the size
                        await tx.execute("bundle_analyze")
                        analyze_at *= 10
                if chunk.texts or chunk.last:  # texts follow the leaves: every record is in
                    await _write_held_back(tx, waiting, verified.expired_parents)
                    waiting = []
                    await _write_texts(tx, chunk.texts)
        if verified.expired_before is not None:
            await tx.execute("bundle_import_expiry", expired_before=verified.expired_before)
        progress("write", root.size, header.records)
    _check_root(root, checkpoint.root_hash)


@dataclass
class _Chunk:
    """Up to a batch of records (retagged to the importing tenant) or of texts, in bundle order."""

    records: list[ContextRecord] = field(default_factory=list)
    tombstones: list[ContextRecord] = field(default_factory=list)  # expired, kept past retention
    texts: list[bundle.BundleText] = field(default_factory=list)
    last: bool = False


def _chunks(
    entries: Iterator[bundle.Entry], root: bundle.RootBuilder, tenant_id: str
) -> Iterator[_Chunk]:
    """The bundle's entries a batch at a time, each batch's leaves folded into `root`."""
    chunk, leaves = _Chunk(), []
    for entry in entries:
        if isinstance(entry, bundle.BundleText):
            chunk.texts.append(entry)
        elif isinstance(entry, bundle.BundleEnd):
            chunk.last = True
        else:
            leaves.append(entry.leaf_hash)
            whole = entry if isinstance(entry, bundle.BundleRecord) else entry.tombstone
            if whole is not None:
                retagged = whole.record.model_copy(update={"tenant_id": tenant_id})
                (chunk.records if whole is entry else chunk.tombstones).append(retagged)
        if len(chunk.records) == BATCH_RECORDS or len(chunk.texts) == BATCH_RECORDS:
            root.add(leaves)
            yield chunk
            chunk, leaves = _Chunk(), []
    root.add(leaves)
    yield chunk


_DONE: Final = _Chunk(last=True)


async def _read_ahead(chunks: Iterator[_Chunk]) -> AsyncGenerator[_Chunk, None]:
    """The chunks, each read and checked in a thread while the caller writes the one before:
    parsing and hashing the bundle overlap the database's work instead of adding to it."""
    pending = asyncio.ensure_future(asyncio.to_thread(next, chunks, _DONE))
    try:
        while (chunk := await pending) is not _DONE:
            pending = asyncio.ensure_future(asyncio.to_thread(next, chunks, _DONE))
            yield chunk
    finally:
        await asyncio.gather(pending, return_exceptions=True)  # the file stays open until then


async def _write_held_back(
    tx: Transaction, waiting: list[ContextRecord], expired: Mapping[str, Roots]
) -> None:
    """Write the records still waiting for their parents; BundleError if some never come."""
    while waiting:
        left = await _write_records(tx, waiting, expired)
        if len(left) == len(waiting):
            shown = ", ".join(record.context_id for record in left[:5])
            raise BundleError(
                f"{len(left)} records name parents that are not in the bundle: {shown}"
            )
        waiting = left


async def _write_records(
    tx: Transaction, records: list[ContextRecord], expired: Mapping[str, Roots]
) -> list[ContextRecord]:
    """Insert the records whose parents are stored, expired or come before them here; the
    others are returned to wait for their parents (a log's leaf order need not put parents
    first)."""
    if not records:
        return []
    tenant_id = tx.tenant_id
    check_batch(tenant_id, records)
    own = {record.context_id for record in records}
    outside = {parent for record in records for parent in record.parent_ids} - own
    present = set(await stored_parents(tx, outside)) if outside else set()
    present |= outside & expired.keys()
    ready: list[ContextRecord] = []
    waiting = records
    placed = True
    while placed:
        placed, still = False, []
        for record in waiting:
            if all(parent in present for parent in record.parent_ids):
                ready.append(record)
                present.add(record.context_id)
                placed = True
            else:
                still.append(record)
        waiting = still
    inserted = await insert_records(tx, ready, expired_parents=expired)
    if len(inserted) != len(ready):
        raise BundleError("the bundle lists a record twice")
    return waiting


async def _write_tombstones(tx: Transaction, tombstones: list[ContextRecord]) -> None:
    """Forget tombstones retention dropped go where it keeps them, signed by this service."""
    for tombstone in tombstones:
        key_id, signature = tx.signer.sign(tombstone.canonical_bytes())
        fields = tombstone.model_dump(exclude={"tenant_id"})
        await tx.execute("bundle_import_tombstone", **fields, key_id=key_id, signature=signature)


async def _write_texts(tx: Transaction, texts: list[bundle.BundleText]) -> None:
    if not texts:
        return
    rows = await tx.fetch(
        "bundle_import_texts",
        context_ids=[text.context_id for text in texts],
        texts=[text.text for text in texts],
        captured_ats=[text.captured_at for text in texts],
    )
    if len(rows) != len(texts):
        written = {row["context_id"] for row in rows}
        missing = [text.context_id for text in texts if text.context_id not in written]
        raise BundleError(f"captured text for records not in the bundle: {missing[:5]}")
