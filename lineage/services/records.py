"""One tenant's records read back by id, with each one's signature check when asked."""

from typing import Any

from lineage.core.errors import NotFound
from lineage.db.database import Database
from lineage.services import reads, signing
from lineage.store.postgres import record_from_row


async def record_node(
    database: Database, tenant_id: str, context_id: str, *, verify: bool = False
) -> dict[str, Any]:
    """The record as the API shows it; with `verify`, also `signature` (signed, verified,
    key_id and reason). NotFound for an unknown or another tenant's id."""
    async with database.tenant(tenant_id) as tx:
        rows = await tx.fetch("get_contexts", context_ids=[context_id])
        if not rows:
            raise NotFound(f"no context {context_id}")
        node = reads.node_from_row(rows[0])
        if verify:
            record = record_from_row(rows[0])
            check = await signing.verify_record(tx.connection, tenant_id, record, tx.signer)
            node["signature"] = check.as_dict()
    return node
