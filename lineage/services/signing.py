"""Signed records: each record's signature, made by the database's keyring (lineage.db.keyring)
for the call that inserts it (lineage.services.appends), stored on the record's row as it is
inserted (`key_id`, `signature`; never by UPDATE), so that a row altered behind the service's
back verifies as false."""

import asyncpg
from pydantic import Field

from lineage import db
from lineage.core.body import Body
from lineage.core.errors import UnknownSigningKey
from lineage.core.record import ContextRecord
from lineage.db.keyring import Signer


# A record's stored row checked against its stored signature.
class SignatureCheck(Body):
    signed: bool
    verified: bool
    key_id: str | None
    reason: str = Field(description="ok, unsigned, mismatch or unknown_key")


async def verify_record(
    connection: asyncpg.Connection, tenant_id: str, record: ContextRecord, signer: Signer
) -> SignatureCheck:
    """Check `record`, as read from the database, against the signature stored beside it."""
    rows = await db.fetch(
        connection, "signature_get", tenant_id=tenant_id, context_ids=[record.context_id]
    )
    if not rows:
        return SignatureCheck(signed=False, verified=False, key_id=None, reason="unsigned")
    key_id: str = rows[0]["key_id"]
    try:
        verified = signer.verify(key_id, record.canonical_bytes(), rows[0]["signature"])
    except UnknownSigningKey:
        return SignatureCheck(signed=True, verified=False, key_id=key_id, reason="unknown_key")
    return SignatureCheck(
        signed=True, verified=verified, key_id=key_id, reason="ok" if verified else "mismatch"
    )
