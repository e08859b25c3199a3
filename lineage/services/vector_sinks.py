"""Forget's reach into the tenant's vector stores (lineage.vector_stores): for each registered
store, which of the forgotten chunk and embedding ids still key vectors there, their deletion,
and a check that none remain, as one receipt per store.

A store that fails (down, refusing, too slow, misnamed) is reported `failed` with the reason,
and the others go on: every step is idempotent, so running the forget again deletes what is left
in that store and reports the rest `already_absent`.
"""

import asyncio
from typing import Literal

from pydantic import Field

from lineage.core.body import Body
from lineage.vector_stores import VectorStore

__all__ = ["BATCH", "StoreReceipt", "clear"]

# Ids per call to a store: one statement or request stays small whatever the radius.
BATCH = 1000
MAX_ERROR_CHARS = 300


class StoreReceipt(Body):
    store: str
    kind: str
    target: str = Field(description="where the vectors are, without credentials")
    status: Literal["deleted", "already_absent", "failed", "would_delete"] = Field(
        description="deleted: vectors were found and none remain; already_absent: none was "
        "found; failed: the store failed or vectors remain (run the forget again); "
        "would_delete: a dry run found vectors"
    )
    asked: int = Field(description="chunk and embedding ids of the radius asked about")
    found: list[str] = Field(description="of those, the ids that keyed vectors at the start")
    remaining: list[str] | None = Field(
        description="ids still keying vectors after the deletion; null when not checked "
        "(a dry run, or a store that failed before the check)"
    )
    error: str | None = Field(description="why the store failed, credentials removed")

    def facts(self) -> dict[str, object]:
        """What the forget's tombstones keep of it: counts, not ids (the ids are the radius)."""
        return {
            "store": self.store,
            "kind": self.kind,
            "target": self.target,
            "status": self.status,
            "asked": self.asked,
            "found": len(self.found),
            "remaining": None if self.remaining is None else len(self.remaining),
            "error": self.error,
        }


async def clear(
    store: VectorStore, ids: list[str], *, dry_run: bool, timeout_s: float
) -> StoreReceipt:
    """Delete the vectors keyed by `ids` from `store` and check that none remain (a dry run
    only looks). Never raises for the store's own failure: the receipt says it."""
    found: list[str] = []
    remaining: list[str] | None = None
    try:
        async with asyncio.timeout(timeout_s):
            found = await _present(store, ids)
            if not dry_run:
                for start in range(0, len(found), BATCH):
                    await store.delete(found[start : start + BATCH])
                remaining = await _present(store, found)
    # Whatever a store's client raises is that store's failure, reported and resumable.
    except Exception as exc:
        return _receipt(store, ids, found, remaining, _reason(store, exc))
    return _receipt(store, ids, found, remaining, None)


async def _present(store: VectorStore, ids: list[str]) -> list[str]:
    found: set[str] = set()
    for start in range(0, len(ids), BATCH):
        found |= await store.present(ids[start : start + BATCH])
    return sorted(found)


def _reason(store: VectorStore, exc: Exception) -> str:
    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, TimeoutError):
        reason = "TimeoutError: no answer within LINEAGE_VECTOR_STORE_TIMEOUT_S"
    for secret in store.secrets():
        reason = reason.replace(secret, "***")
    return reason[:MAX_ERROR_CHARS]


def _receipt(
    store: VectorStore,
    ids: list[str],
    found: list[str],
    remaining: list[str] | None,
    error: str | None,
) -> StoreReceipt:
    if error is not None or remaining:
        status: Literal["deleted", "already_absent", "failed", "would_delete"] = "failed"
        if error is None:
            error = f"{len(remaining or [])} ids still key vectors after the deletion"
    elif not found:
        status = "already_absent"
    elif remaining is None:
        status = "would_delete"
    else:
        status = "deleted"
    return StoreReceipt(
        store=store.name,
        kind=store.kind,
        target=store.target(),
        status=status,
        asked=len(ids),
        found=found,
        remaining=remaining,
        error=error,
    )
