"""The one insert path: every record the service stores (an append, a bundle import) is checked,
keyed, stamped, inserted with everything that follows it (transform versions, root sources,
signature, the log's queue) and counted here, in the caller's tenant transaction."""

import asyncio
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import asyncpg

from lineage.core import metrics
from lineage.core.errors import Conflict, InvalidRecord
from lineage.core.offload import per_record
from lineage.core.record import ContextRecord, NewContext, check_batch
from lineage.core.store import Appended
from lineage.core.versions import version_key
from lineage.db.database import Database, Transaction
from lineage.db.errors import is_shard_moved
from lineage.db.keyring import Signer
from lineage.services import events, privacy
from lineage.services.partitions import ensure_partitions
from lineage.services.postings import append_arguments, batch_postings, id_literal
from lineage.services.records import get_records
from lineage.services.root_sources import Roots, StoredParent, batch_roots, stored_parents

# A shard split or move under an append: three tries, half a second apart, then a 503.
SHARD_MOVED_ATTEMPTS = 3
SHARD_MOVED_PAUSE_S = 0.5


async def append(
    database: Database, tenant_id: str, proposals: Sequence[NewContext]
) -> list[Appended]:
    """Append in a tenant transaction of its own (all or none): the API's append. Run again
    when Citus moved the tenant's shard under it (rolled back whole, so nothing is twice)."""
    attempt = 1
    while True:
        try:
            async with database.tenant(tenant_id) as tx:
                return await append_records(tx, proposals)
        except asyncpg.exceptions.InternalServerError as exc:
            if not is_shard_moved(exc) or attempt == SHARD_MOVED_ATTEMPTS:
                raise
        attempt += 1
        await asyncio.sleep(SHARD_MOVED_PAUSE_S)


async def append_records(
    tx: Transaction,
    proposals: Sequence[NewContext],
    *,
    texts: Mapping[str, str] | None = None,
) -> list[Appended]:
    """Append within the caller's transaction; raise (and let it roll back) on any bad record.

    The time is assigned here, before the insert, so that it is part of the canonical form.
    New records are signed with the transaction's keyring. `texts` (id -> text, opt-in) are
    captured beside them if the tenant's switches allow, else nothing is appended.
    """
    await per_record(len(proposals), check_batch, tx.tenant_id, proposals)
    proposals = await privacy.keyed_proposals(tx, proposals)
    records = await per_record(len(proposals), _stamped, tx.tenant_id, proposals)
    inserted = await insert_records(tx, records)
    existing_ids = [r.context_id for r in records if r.context_id not in inserted]
    stored: dict[str, ContextRecord] = {}
    if existing_ids:
        stored = await get_records(tx, existing_ids)
        for proposal in proposals:
            earlier = stored.get(proposal.context_id)
            if earlier is not None and not earlier.same_content(proposal):
                raise Conflict(
                    f"context_id {proposal.context_id} already exists with other content; "
                    "records are append-only: derive a new record (new id) from it instead"
                )
    if texts:
        await privacy.capture(tx, texts, {r.context_id: r.kind for r in records})
    return [
        Appended(record, created=True)
        if record.context_id in inserted
        else Appended(stored[record.context_id], created=False)
        for record in records
    ]


def _stamped(tenant_id: str, proposals: Sequence[NewContext]) -> list[ContextRecord]:
    now = datetime.now(UTC)
    return [proposal.stamped(tenant_id, now) for proposal in proposals]


async def insert_records(
    tx: Transaction,
    records: Sequence[ContextRecord],
    *,
    expired_parents: Mapping[str, Roots] = MappingProxyType({}),
) -> set[str]:
    """Insert stamped records, with everything that follows a record (edges, root sources and
    postings, transform version, signature, log-queue row, stream position), in the caller's
    transaction: one call of the owner's lineage_append. Returns the ids inserted; ids already
    stored are left alone. Parents must be earlier in `records`, stored, or in `expired_parents`
    (a bundle import's records that retention dropped before the export, with the root sources
    they pass on): InvalidRecord otherwise.
    `append_records` (new records) and bundle imports (records as exported) both write here."""
    if not records:
        return set()
    stored = await _check_parents(tx, records, expired_parents)
    await ensure_partitions(tx.connection, (r.created_at for r in records))
    columns = await per_record(len(records), _columns, records, tx.signer, expired_parents, stored)
    [row] = await tx.fetch("append_records", tenant_token=tx.token, **columns)
    if row["stored_twice"]:
        raise Conflict(
            f"context_id {row['stored_twice'][0]} was appended by another request at the same "
            "moment; send the batch again (the other append is stored)"
        )
    inserted = set(row["inserted"])
    if row["last_position"] is not None:
        await events.notify_appended(tx, row["last_position"])
    metrics.count_appended(record.kind for record in records if record.context_id in inserted)
    return inserted


def _columns(
    records: Sequence[ContextRecord],
    signer: Signer,
    expired: Mapping[str, Roots],
    stored: Mapping[str, StoredParent],
) -> dict[str, list[Any]]:
    """lineage_append's arguments: one list per column, each record signed, its root sources
    and postings carried down from its parents' (an expired parent's postings are unknown)."""
    signed = [signer.sign(r.canonical_bytes()) for r in records]
    roots = batch_roots(records, {**expired, **{k: p.roots for k, p in stored.items()}})
    postings = batch_postings(records, {k: p.postings for k, p in stored.items()})
    return {
        "context_ids": [r.context_id for r in records],
        "parent_id_lists": [id_literal(r.parent_ids) for r in records],
        "kinds": [r.kind for r in records],
        "source_uris": [r.source_uri for r in records],
        "content_hashes": [r.content_hash for r in records],
        "transforms": [r.transform for r in records],
        "transform_versions": [r.transform_version for r in records],
        "version_keys": [
            version_key(r.transform_version) if r.transform_version else None for r in records
        ],
        "produced_bys": [r.produced_by for r in records],
        "index_snapshots": [r.index_snapshot for r in records],
        "trace_ids": [r.trace_id for r in records],
        "created_ats": [r.created_at for r in records],
        "attribute_docs": [json.dumps(r.attributes) for r in records],
        "key_ids": [key_id for key_id, _ in signed],
        "signatures": [signature for _, signature in signed],
        **append_arguments(records, roots, postings),
    }


async def _check_parents(
    tx: Transaction, records: Sequence[ContextRecord], expired: Mapping[str, Roots]
) -> dict[str, StoredParent]:
    """Parents must be earlier in the batch, stored for this tenant or expired; others look
    unknown.

    Returns the stored parents' root sources and postings, read in the same round trip.
    """
    earlier: set[str] = set()
    outside: dict[str, str] = {}
    for record in records:
        for parent_id in record.parent_ids:
            if parent_id not in earlier and parent_id not in expired:
                outside.setdefault(parent_id, record.context_id)
        earlier.add(record.context_id)
    if not outside:
        return {}
    found = await stored_parents(tx, outside.keys())
    unknown = [p for p in outside if p not in found]
    if unknown:
        shown = ", ".join(unknown[:5]) + (
            f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        )
        raise InvalidRecord(
            "unknown_parent",
            f"parent ids not found: {shown} (record {outside[unknown[0]]}); record each parent "
            "first, or earlier in the same batch",
        )
    return found
