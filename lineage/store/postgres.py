"""The store that talks to Postgres directly."""

import json
from collections.abc import Sequence
from datetime import UTC, datetime

import asyncpg

from lineage import db
from lineage.errors import Conflict, InvalidRecord
from lineage.record import ContextRecord, NewContext, check_id, validate
from lineage.store.base import Appended
from lineage.versions import version_key


def record_from_row(row: asyncpg.Record) -> ContextRecord:
    return ContextRecord(
        tenant_id=row["tenant_id"],
        context_id=row["context_id"],
        parent_ids=list(row["parent_ids"]),
        kind=row["kind"],
        source_uri=row["source_uri"],
        content_hash=row["content_hash"],
        transform=row["transform"],
        transform_version=row["transform_version"],
        produced_by=row["produced_by"],
        index_snapshot=row["index_snapshot"],
        trace_id=row["trace_id"],
        created_at=row["created_at"],
        attributes=row["attributes"],
    )


def _array_literal(ids: list[str]) -> str:
    # Ids match record.ID_PATTERN, so they hold no quote, backslash, comma or brace.
    return "{" + ",".join(f'"{i}"' for i in ids) + "}"


async def append_records(
    connection: asyncpg.Connection, tenant_id: str, proposals: Sequence[NewContext]
) -> list[Appended]:
    """Append within the caller's transaction; raise (and let it roll back) on any bad record.

    The time is assigned here, before the insert, so that it is part of the canonical form.
    """
    check_id(tenant_id, "tenant_id")
    for proposal in proposals:
        validate(proposal)
    now = datetime.now(UTC)
    records = [proposal.stamped(tenant_id, now) for proposal in proposals]
    batch_ids = [r.context_id for r in records]
    if len(set(batch_ids)) != len(batch_ids):
        raise InvalidRecord("duplicate_id", "a batch lists the same context_id more than once")
    await _check_parents(connection, tenant_id, records)

    inserted = {
        row["context_id"]
        for row in await db.fetch(
            connection,
            "append_contexts",
            tenant_id=tenant_id,
            context_ids=batch_ids,
            parent_id_lists=[_array_literal(r.parent_ids) for r in records],
            kinds=[r.kind for r in records],
            source_uris=[r.source_uri for r in records],
            content_hashes=[r.content_hash for r in records],
            transforms=[r.transform for r in records],
            transform_versions=[r.transform_version for r in records],
            produced_bys=[r.produced_by for r in records],
            index_snapshots=[r.index_snapshot for r in records],
            trace_ids=[r.trace_id for r in records],
            created_ats=[r.created_at for r in records],
            attribute_docs=[json.dumps(r.attributes) for r in records],
        )
    }
    existing_ids = [i for i in batch_ids if i not in inserted]
    stored: dict[str, ContextRecord] = {}
    if existing_ids:
        stored = await get_records(connection, tenant_id, existing_ids)
        for proposal in proposals:
            earlier = stored.get(proposal.context_id)
            if earlier is not None and not earlier.same_content(proposal):
                raise Conflict(
                    f"context_id {proposal.context_id} already exists with other content; "
                    "records are append-only: derive a new record (new id) from it instead"
                )
    await _note_transform_versions(connection, tenant_id, records, inserted)
    return [
        Appended(record, created=True)
        if record.context_id in inserted
        else Appended(stored[record.context_id], created=False)
        for record in records
    ]


async def _check_parents(
    connection: asyncpg.Connection, tenant_id: str, records: Sequence[ContextRecord]
) -> None:
    """Parents must be earlier in the batch or stored for this tenant; others look unknown."""
    earlier: set[str] = set()
    outside: dict[str, str] = {}
    for record in records:
        for parent_id in record.parent_ids:
            if parent_id not in earlier:
                outside.setdefault(parent_id, record.context_id)
        earlier.add(record.context_id)
    if not outside:
        return
    found = await get_records(connection, tenant_id, list(outside))
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


async def _note_transform_versions(
    connection: asyncpg.Connection,
    tenant_id: str,
    records: Sequence[ContextRecord],
    inserted: set[str],
) -> None:
    first_seen: dict[str, datetime] = {}
    for record in records:
        if record.transform_version and record.context_id in inserted:
            first_seen.setdefault(record.transform_version, record.created_at)
    if first_seen:
        await db.execute(
            connection,
            "record_transform_versions",
            tenant_id=tenant_id,
            transform_versions=list(first_seen),
            version_keys=[version_key(v) for v in first_seen],
            first_seens=list(first_seen.values()),
        )


async def get_records(
    connection: asyncpg.Connection, tenant_id: str, context_ids: Sequence[str]
) -> dict[str, ContextRecord]:
    """The tenant's records with these ids; unknown and foreign ids are simply absent."""
    rows = await db.fetch(
        connection, "get_contexts", tenant_id=tenant_id, context_ids=list(context_ids)
    )
    return {row["context_id"]: record_from_row(row) for row in rows}


class ConnectionStore:
    """A Store over one open connection, so derive() writes inside the caller's transaction."""

    def __init__(self, connection: asyncpg.Connection, tenant_id: str) -> None:
        self.connection = connection
        self.tenant_id = tenant_id

    async def append(self, proposals: Sequence[NewContext]) -> list[Appended]:
        return await append_records(self.connection, self.tenant_id, proposals)

    async def get(self, context_id: str) -> ContextRecord | None:
        return (await get_records(self.connection, self.tenant_id, [context_id])).get(context_id)


class PostgresStore:
    """Writes and reads one tenant's records through an asyncpg pool it does not own."""

    def __init__(self, pool: asyncpg.Pool, tenant_id: str = "default") -> None:
        self.pool = pool
        self.tenant_id = tenant_id

    async def append(self, proposals: Sequence[NewContext]) -> list[Appended]:
        async with db.transaction(self.pool, self.tenant_id) as connection:
            return await append_records(connection, self.tenant_id, proposals)

    async def get(self, context_id: str) -> ContextRecord | None:
        async with db.transaction(self.pool, self.tenant_id) as connection:
            return await ConnectionStore(connection, self.tenant_id).get(context_id)
