"""The verifiable log: the key that signs checkpoints, checkpoints, inclusion and consistency
proofs. Hashes are base64 (RFC 4648), as in the checkpoint text; see
lineage/verifiable_log/checkpoint.py for the checkpoint format."""

import base64
from typing import Annotated, Any

from fastapi import APIRouter, Query

from lineage.api import models
from lineage.api.deps import AppSettings, Db, Read, ReadDb
from lineage.core import cursors
from lineage.core.record import format_timestamp
from lineage.verifiable_log import storage
from lineage.verifiable_log.checkpoint import Checkpoint

router = APIRouter(prefix="/v1/log", tags=["verifiable log"])


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


@router.get("/key", response_model=models.LogKey)
async def get_key(caller: Read, settings: AppSettings) -> dict[str, str]:
    """The verifier key of the checkpoints' Ed25519 signatures. Save it once, from a source you
    trust: it is what lets you check checkpoints without trusting this server later."""
    verifier = storage.signing_key(settings).verifier
    return {
        "key_name": verifier.name,
        "algorithm": "Ed25519",
        "public_key": _b64(verifier.public_key),
        "verifier_key": str(verifier),
    }


@router.get("/checkpoint", response_model=models.Checkpoint)
async def get_checkpoint(caller: Read, database: Db, settings: AppSettings) -> dict[str, Any]:
    """The caller's newest signed checkpoint, after integrating at most one step
    (LINEAGE_LOG_STEP_LEAVES) of its queued records: `queued` says how many appended records it
    does not cover yet, which the service integrates in the background; ask again for them.
    `note` is the signed text to save."""
    signed = await storage.checkpoint(database, settings, caller.tenant_id, max_steps=1)
    return {
        "origin": signed.checkpoint.origin,
        "tree_size": signed.checkpoint.tree_size,
        "root_hash": _b64(signed.checkpoint.root_hash),
        "time": format_timestamp(signed.checkpoint.time),
        "note": signed.note,
        "queued": signed.queued,
    }


@router.get("/checkpoints", response_model=models.Checkpoints)
async def get_checkpoints(
    caller: Read,
    database: ReadDb,
    after: Annotated[
        int, Query(ge=0, description="Only checkpoints larger than this tree size.")
    ] = 0,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many.")] = 100,
) -> dict[str, Any]:
    """Every checkpoint the service signed for the caller's log, oldest first, larger than
    `after`, a page at a time (follow `next`): what a monitor follows (`lineage log monitor
    --url`), so that two checkpoints that do not extend one another are seen by someone other
    than the server."""
    (paged,) = cursors.decode(cursor, int) if cursor is not None else (0,)
    notes = await storage.checkpoint_history(database, caller.tenant_id, max(after, paged), limit)
    last = Checkpoint.from_note(notes[-1]).tree_size if len(notes) == limit else None
    return {"checkpoints": notes, "next": cursors.encode(last) if last is not None else None}


@router.get("/proof/inclusion", response_model=models.InclusionProof)
async def get_inclusion_proof(
    caller: Read,
    database: ReadDb,
    context_id: str,
    tree_size: Annotated[int, Query(ge=1, description="A checkpoint's tree size.")],
) -> dict[str, Any]:
    """The record as stored, its leaf index and the proof that it is in the tree of
    `tree_size` leaves. Recompute the leaf hash from the record yourself:
    SHA-256(0x00 || RFC 8785 canonical form). A record gone from the store has `record` null
    and the proof still shows its leaf hash at its index; `expired` is true where retention
    dropped it (`created_at`, as its leaf kept it, before `expired_before`, the tenant's
    horizon), false where it did not (then the record was removed around the service)."""
    found = await storage.inclusion(database, caller.tenant_id, context_id, tree_size)
    return {
        "context_id": context_id,
        "leaf_index": found.leaf_index,
        "tree_size": found.tree_size,
        "leaf_hash": _b64(found.leaf_hash),
        "proof": [_b64(h) for h in found.proof],
        "record": found.record.api_dict() if found.record else None,
        "expired": found.expired,
        "expired_before": found.expired_before,
        "created_at": found.created_at,
    }


@router.get("/proof/consistency", response_model=models.ConsistencyProof)
async def get_consistency_proof(
    caller: Read,
    database: ReadDb,
    first: Annotated[int, Query(ge=1, description="The older checkpoint's tree size.")],
    second: Annotated[int, Query(ge=1, description="The newer checkpoint's tree size.")],
) -> dict[str, Any]:
    """Proof that the tree of `second` leaves extends the tree of `first` (RFC 6962 2.1.2)."""
    proof = await storage.consistency(database, caller.tenant_id, first, second)
    return {"first": first, "second": second, "proof": [_b64(h) for h in proof]}
