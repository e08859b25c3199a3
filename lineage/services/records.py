"""One tenant's records read back by id, with each one's signature check when asked."""

from collections.abc import Sequence
from typing import Any

import asyncpg

from lineage.core.errors import NotFound
from lineage.core.record import ContextRecord
from lineage.db.database import Database, Transaction
from lineage.db.keyring import Signer
from lineage.services import reads, signing
from lineage.settings import Settings


def record_from_row(row: asyncpg.Record) -> ContextRecord:
    return ContextRecord(**{name: row[name] for name in ContextRecord.model_fields})


async def get_records(tx: Transaction, context_ids: Sequence[str]) -> dict[str, ContextRecord]:
    """The tenant's records with these ids; unknown and foreign ids are simply absent."""
    rows = await tx.fetch("get_contexts", context_ids=list(context_ids))
    return {row["context_id"]: record_from_row(row) for row in rows}


async def verify_stored(
    database: Database, tenant_id: str, context_id: str, signer: Signer
) -> signing.SignatureCheck:
    """Check the tenant's stored record against its stored signature; NotFound if unknown."""
    async with database.tenant(tenant_id) as tx:
        record = (await get_records(tx, [context_id])).get(context_id)
        if record is None:
            raise NotFound(f"no context {context_id} in tenant {tenant_id}")
        return await signing.verify_record(tx.connection, tenant_id, record, signer)


async def record_node(
    database: Database, settings: Settings, tenant_id: str, context_id: str, *, verify: bool = False
) -> dict[str, Any]:
    """The record as the API shows it; with `verify`, also `signature` (signed, verified,
    key_id and reason). NotFound for an unknown or another tenant's id. Without `verify` it is
    one call (reads.ONE_CALL); the check reads the signing keys in the tenant's transaction."""
    if not verify:
        found = await reads.records_by_id(database, settings, tenant_id, [context_id])
        if not found:
            raise NotFound(f"no context {context_id}")
        return found[0]
    async with database.tenant(tenant_id) as tx:
        rows = await tx.fetch("get_contexts", context_ids=[context_id])
        if not rows:
            raise NotFound(f"no context {context_id}")
        node = reads.node_from_row(rows[0])
        check = await signing.verify_record(
            tx.connection, tenant_id, record_from_row(rows[0]), tx.signer
        )
        node["signature"] = check.model_dump(mode="json")
    return node
