"""The store that talks to Postgres directly."""

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime

import asyncpg

from lineage import db
from lineage.core import metrics
from lineage.core.errors import Conflict, InvalidRecord, StoreUnavailable
from lineage.core.record import ContextRecord, NewContext, check_id, validate
from lineage.core.versions import version_key
from lineage.services import events, privacy, signing
from lineage.store.base import Appended
from lineage.store.roots import Roots, note_root_sources, stored_root_sources


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


def check_batch(tenant_id: str, proposals: Sequence[NewContext]) -> None:
    """Every rule a batch must pass that needs no database; raises InvalidRecord."""
    check_id(tenant_id, "tenant_id")
    for proposal in proposals:
        validate(proposal)
    batch_ids = [p.context_id for p in proposals]
    if len(set(batch_ids)) != len(batch_ids):
        raise InvalidRecord("duplicate_id", "a batch lists the same context_id more than once")


async def append_records(
    connection: asyncpg.Connection,
    tenant_id: str,
    proposals: Sequence[NewContext],
    signer: signing.Signer | None = None,
) -> list[Appended]:
    """Append within the caller's transaction; raise (and let it roll back) on any bad record.

    The time is assigned here, before the insert, so that it is part of the canonical form.
    New records are signed with `signer` (default: the environment's keyring).
    """
    check_batch(tenant_id, proposals)
    proposals = await privacy.keyed_proposals(connection, tenant_id, proposals)
    now = datetime.now(UTC)
    records = [proposal.stamped(tenant_id, now) for proposal in proposals]
    inserted = await insert_records(connection, tenant_id, records, signer)
    existing_ids = [r.context_id for r in records if r.context_id not in inserted]
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
    return [
        Appended(record, created=True)
        if record.context_id in inserted
        else Appended(stored[record.context_id], created=False)
        for record in records
    ]


async def insert_records(
    connection: asyncpg.Connection,
    tenant_id: str,
    records: Sequence[ContextRecord],
    signer: signing.Signer | None = None,
) -> set[str]:
    """Insert stamped records, with everything that follows a record (transform versions, root
    sources, signature), in the caller's transaction; the ids inserted. Ids already stored are
    left alone. Parents must be earlier in `records` or stored: InvalidRecord otherwise.
    `append_records` (new records) and bundle imports (records as exported) both write here."""
    batch_ids = [r.context_id for r in records]
    stored_parents = await _check_parents(connection, tenant_id, records)
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
    await _note_transform_versions(connection, tenant_id, records, inserted)
    new = [record for record in records if record.context_id in inserted]
    await note_root_sources(connection, tenant_id, new, stored_parents)
    await signing.append_signatures(connection, tenant_id, new, signer or signing.default_signer())
    # Last: it holds the tenant's stream counter until commit.
    await events.note_appended(connection, tenant_id, [record.context_id for record in new])
    metrics.count_appended(record.kind for record in new)
    return inserted


async def _check_parents(
    connection: asyncpg.Connection, tenant_id: str, records: Sequence[ContextRecord]
) -> dict[str, Roots]:
    """Parents must be earlier in the batch or stored for this tenant; others look unknown.

    Returns the stored parents' root sources, read in the same round trip.
    """
    earlier: set[str] = set()
    outside: dict[str, str] = {}
    for record in records:
        for parent_id in record.parent_ids:
            if parent_id not in earlier:
                outside.setdefault(parent_id, record.context_id)
        earlier.add(record.context_id)
    if not outside:
        return {}
    found = await stored_root_sources(connection, tenant_id, outside.keys())
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

    def __init__(
        self,
        connection: asyncpg.Connection,
        tenant_id: str,
        signer: signing.Signer | None = None,
    ) -> None:
        self.connection = connection
        self.tenant_id = tenant_id
        self.signer = signer  # the app's keyring in a request; default: the environment's

    async def append(self, proposals: Sequence[NewContext]) -> list[Appended]:
        return await append_records(self.connection, self.tenant_id, proposals, self.signer)

    async def get(self, context_id: str) -> ContextRecord | None:
        return (await get_records(self.connection, self.tenant_id, [context_id])).get(context_id)


# The database itself failed (down, restarting, out of connections, cancelled, unreachable):
# nothing in the request was wrong, and the same request can succeed later.
OUTAGE_ERRORS: tuple[type[Exception], ...] = (
    OSError,  # refused, reset, unreachable, timed out (TimeoutError is an OSError)
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InsufficientResourcesError,
    asyncpg.exceptions.InternalClientError,  # its protocol state when a connection broke mid-call
)


def is_outage(exc: BaseException) -> bool:
    """An outage error, or an error raised over one: a transaction's rollback on a dead
    connection raises InterfaceError ("connection is closed") with the real cause as context."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, OUTAGE_ERRORS):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


@contextmanager
def outage_as_unavailable() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        if not is_outage(exc):
            raise
        raise StoreUnavailable(f"PostgreSQL is unavailable: {type(exc).__name__}: {exc}") from exc


class PostgresStore:
    """Writes and reads one tenant's records through an asyncpg pool it does not own."""

    def __init__(
        self, pool: asyncpg.Pool, tenant_id: str = "default", signer: signing.Signer | None = None
    ) -> None:
        self.pool = pool
        self.tenant_id = tenant_id
        self.signer = signer

    async def append(self, proposals: Sequence[NewContext]) -> list[Appended]:
        with outage_as_unavailable():
            async with db.transaction(self.pool, self.tenant_id) as connection:
                return await append_records(connection, self.tenant_id, proposals, self.signer)

    async def get(self, context_id: str) -> ContextRecord | None:
        with outage_as_unavailable():
            async with db.transaction(self.pool, self.tenant_id) as connection:
                return await ConnectionStore(connection, self.tenant_id).get(context_id)
