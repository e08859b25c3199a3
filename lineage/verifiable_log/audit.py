"""Verification off the server: is a record's whole lineage under a saved checkpoint, and does
a newer checkpoint extend a saved older one?

Trust comes only from the verifier key and the saved checkpoint. The service (or its database)
supplies records and proofs; every check is done here, with `merkle` and `checkpoint`: the
checkpoint's signature, each leaf hash recomputed from the record's canonical form, each
inclusion proof against the checkpoint's root, each consistency proof between roots.

The walk-back checked is the one `walks.walk_back` returns, without its depth bound, but
followed through the parent_ids of records that verified, so a server cannot hide an ancestor
by leaving it out of a walk: a parent id is part of its child's logged canonical form.

Data comes from a `LogSource`: `HttpSource` asks the API (what an auditor without database
access uses), `DatabaseSource` runs the same code as the API against the database (what the
CLI does by default, like its other commands).
"""

import base64
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import httpx

from lineage.core.errors import (
    BadParameter,
    NotConsistent,
    NotFound,
    ProofError,
    StoreUnavailable,
    refusal,
)
from lineage.core.record import ContextRecord
from lineage.db.database import Database
from lineage.settings import Settings
from lineage.verifiable_log import merkle, storage
from lineage.verifiable_log.checkpoint import Checkpoint, VerifierKey
from lineage.verifiable_log.storage import InclusionProof


class LogSource(Protocol):
    async def checkpoint(self) -> str:
        """The log's newest signed checkpoint note."""
        ...

    async def inclusion(self, context_id: str, tree_size: int) -> InclusionProof: ...

    async def consistency(self, first: int, second: int) -> list[bytes]: ...

    async def history(self, after: int) -> list[str]:
        """Signed checkpoint notes larger than `after`, oldest first (one page)."""
        ...

    async def signature(self, context_id: str) -> dict[str, Any]:
        """The record's signature check: signed, verified, key_id, reason, and by whom."""
        ...


HISTORY_PAGE = 100


class DatabaseSource:
    """The service's own functions, straight on the database, confined to one tenant."""

    def __init__(self, database: Database, settings: Settings, tenant_id: str) -> None:
        self.database = database
        self.settings = settings
        self.tenant_id = tenant_id

    async def checkpoint(self) -> str:
        """As stored: signing is the service's (or `lineage log checkpoint`'s) job."""
        return (await storage.latest_checkpoint(self.database, self.tenant_id)).note

    async def inclusion(self, context_id: str, tree_size: int) -> InclusionProof:
        return await storage.inclusion(self.database, self.tenant_id, context_id, tree_size)

    async def consistency(self, first: int, second: int) -> list[bytes]:
        return await storage.consistency(self.database, self.tenant_id, first, second)

    async def history(self, after: int) -> list[str]:
        return await storage.checkpoint_history(self.database, self.tenant_id, after, HISTORY_PAGE)

    async def signature(self, context_id: str) -> dict[str, Any]:
        """Checked here, with the record keyring on this machine (the service's)."""
        from lineage.db import keyring
        from lineage.services import signing
        from lineage.services.records import get_records

        path = keyring.keyring_path(self.settings)
        if not path.exists():
            return {"verified": False, "reason": f"no record keyring here ({path})"}
        signer = keyring.load_keyring(path, create=False)
        async with self.database.tenant(self.tenant_id) as tx:
            record = (await get_records(tx, [context_id]))[context_id]
            check = await signing.verify_record(tx.connection, self.tenant_id, record, signer)
        return {**check.model_dump(mode="json"), "checked_by": "this machine's record keyring"}


class HttpSource:
    """The API's /v1/log endpoints, as the caller's key's tenant."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def _get(self, path: str, **params: Any) -> dict[str, Any]:
        try:
            response = await self.client.get(path, params=params)
        except httpx.HTTPError as exc:
            raise StoreUnavailable(f"lineage API unreachable: {exc!r}") from exc
        if response.is_error:
            raise refusal(response)
        body: dict[str, Any] = response.json()
        return body

    async def checkpoint(self) -> str:
        """The service brings the log up to date and signs if it grew."""
        note: str = (await self._get("/v1/log/checkpoint"))["note"]
        return note

    async def inclusion(self, context_id: str, tree_size: int) -> InclusionProof:
        body = await self._get(
            "/v1/log/proof/inclusion", context_id=context_id, tree_size=tree_size
        )
        horizon, created_at = body.get("expired_before"), body.get("created_at")
        return InclusionProof(
            record=ContextRecord.model_validate(body["record"]) if body["record"] else None,
            leaf_index=body["leaf_index"],
            tree_size=body["tree_size"],
            leaf_hash=_unb64(body["leaf_hash"]),
            proof=[_unb64(h) for h in body["proof"]],
            expired_before=datetime.fromisoformat(horizon) if horizon else None,
            created_at=datetime.fromisoformat(created_at) if created_at else None,
        )

    async def consistency(self, first: int, second: int) -> list[bytes]:
        body = await self._get("/v1/log/proof/consistency", first=first, second=second)
        return [_unb64(h) for h in body["proof"]]

    async def history(self, after: int) -> list[str]:
        body = await self._get("/v1/log/checkpoints", after=after, limit=HISTORY_PAGE)
        return list(body["checkpoints"])

    async def signature(self, context_id: str) -> dict[str, Any]:
        """Record signatures are HMACs under the server's keyring: only the server can check
        them, so this is its word, said as such."""
        body = await self._get(f"/v1/contexts/{context_id}", verify="true")
        return {**body["signature"], "checked_by": "the server"}


def _unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


@dataclass
class WalkVerification:
    checkpoint: Checkpoint
    included: list[tuple[str, int, str]] = field(default_factory=list)  # id, leaf, kind
    problems: list[tuple[str, str]] = field(default_factory=list)  # id, what is wrong
    # Ancestors retention dropped: their leaf hash is proven in the tree, their content is gone.
    expired: list[tuple[str, int]] = field(default_factory=list)  # id, leaf

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        cp = self.checkpoint
        out = [f"checkpoint {cp.origin} size {cp.tree_size}, signed {cp.time:%Y-%m-%d %H:%M:%S}Z"]
        out += [
            f"  ok    leaf {leaf:>8}  {kind} {cid}, signed" for cid, leaf, kind in self.included
        ]
        out += [
            f"  gone  leaf {leaf:>8}  {cid}: expired under the retention period; its leaf hash "
            "is in the tree, the record is gone (a kept copy can be checked against the leaf)"
            for cid, leaf in self.expired
        ]
        out += [f"  FAIL  {cid}: {problem}" for cid, problem in self.problems]
        if self.ok and self.included:
            out.append(
                f"verified: {self.included[0][0]} and its {len(self.included) - 1} ancestors "
                "are in the log under this checkpoint, unchanged, each with a valid signature"
                + (
                    f"; {len(self.expired)} more expired, their ancestors unknown"
                    if self.expired
                    else ""
                )
            )
        else:
            out.append(
                f"NOT verified: {len(self.problems)} of {len(self.problems) + len(self.included)}"
                " records fail against this checkpoint"
            )
        return out


async def verify_walk(
    source: LogSource, key: VerifierKey, note: str, context_id: str
) -> WalkVerification:
    """Check that the record and every ancestor are in the log under the signed checkpoint."""
    checkpoint = key.open(note)
    result = WalkVerification(checkpoint)
    pending, seen = deque([context_id]), {context_id}
    while pending:
        current = pending.popleft()
        try:
            found = await source.inclusion(current, checkpoint.tree_size)
        except (NotFound, BadParameter) as exc:
            result.problems.append((current, str(exc)))
            continue
        if found.record is None:
            problem = _check_expired_leaf(checkpoint, found)
            if problem:
                result.problems.append((current, problem))
            else:
                result.expired.append((current, found.leaf_index))
            continue
        problem = _check_inclusion(checkpoint, current, found) or await _check_signature(
            source, current
        )
        if problem:
            result.problems.append((current, problem))
        else:
            result.included.append((current, found.leaf_index, found.record.kind))
        for parent_id in found.record.parent_ids:
            if parent_id not in seen:
                seen.add(parent_id)
                pending.append(parent_id)
    return result


async def _check_signature(source: LogSource, context_id: str) -> str | None:
    """A record in the log is not enough: one inserted around the service (and queued by hand)
    is logged too, but carries no signature of the service's."""
    check = await source.signature(context_id)
    if check.get("verified"):
        return None
    return (
        f"its signature does not verify ({check.get('reason')}, checked by "
        + str(check.get("checked_by", "the source"))
        + ")"
    )


def _check_expired_leaf(checkpoint: Checkpoint, found: InclusionProof) -> str | None:
    """A record gone from the store expired (the tenant's records expire) and its leaf, as
    the log holds it, is in the signed tree."""
    if found.expired_before is None:
        return (
            f"missing: leaf {found.leaf_index} of the log is this record, but the store has no "
            "such record and retention never expired any of this tenant's records, so it was "
            "removed around the service (its tables were altered)"
        )
    if not found.expired:
        return (
            f"missing: leaf {found.leaf_index} of the log is this record, created "
            f"{found.created_at:%Y-%m-%d %H:%M:%S}Z, but the store has no such record and "
            f"retention drops only what was created before {found.expired_before:%Y-%m-%d}, so "
            "it was removed around the service (its tables were altered)"
        )
    try:
        merkle.verify_inclusion(
            found.leaf_hash, found.leaf_index, checkpoint.tree_size, found.proof,
            checkpoint.root_hash,
        )  # fmt: skip
    except ProofError as exc:
        return f"expired, and its leaf is not in the log under this checkpoint: {exc}"
    return None


def _check_inclusion(checkpoint: Checkpoint, context_id: str, found: InclusionProof) -> str | None:
    record = found.record
    assert record is not None
    if record.context_id != context_id or record.tenant_id != checkpoint.tenant_id:
        return (
            f"the source answered with record {record.tenant_id}/{record.context_id} "
            f"instead of {checkpoint.tenant_id}/{context_id}"
        )
    leaf = merkle.leaf_hash(record.canonical_bytes())
    try:
        merkle.verify_inclusion(
            leaf, found.leaf_index, checkpoint.tree_size, found.proof, checkpoint.root_hash
        )
    except ProofError as exc:
        if leaf != found.leaf_hash:
            return (
                f"the record was changed after it was logged: it hashes to {leaf.hex()}, "
                f"but leaf {found.leaf_index} of the log is {found.leaf_hash.hex()}"
            )
        return f"not in the log under this checkpoint: {exc}"
    return None


@dataclass(frozen=True)
class Consistency:
    old: Checkpoint
    new: Checkpoint
    new_note: str
    checked: int  # published checkpoints checked against the saved one, the newest included


async def monitor(source: LogSource, key: VerifierKey, old_note: str) -> Consistency:
    """Fetch the newest checkpoint and prove it extends the saved one, or raise NotConsistent."""
    old = key.open(old_note)
    new_note = await source.checkpoint()
    new = key.open(new_note)
    if new.origin != old.origin:
        raise NotConsistent(f"the new checkpoint is for log {new.origin}, not {old.origin}")
    if new.tree_size < old.tree_size:
        raise NotConsistent(
            f"the log shrank: the saved checkpoint has {old.tree_size} leaves, "
            f"the new one {new.tree_size}"
        )
    witnessed = [*await _history(source, key, old, new.tree_size), new]
    for later in witnessed:
        await _check_extends(source, old, later)
    return Consistency(old, new, new_note, len(witnessed))


async def _history(
    source: LogSource, key: VerifierKey, old: Checkpoint, up_to: int
) -> list[Checkpoint]:
    """Every checkpoint the log published after the saved one, up to the newest, each opened
    with the key: a fork signed in between is seen even if the newest one is consistent."""
    found: list[Checkpoint] = []
    after = old.tree_size - 1 if old.tree_size > 0 else 0
    while True:
        page = await source.history(after)
        for note in page:
            opened = key.open(note)
            if opened.origin != old.origin:
                raise NotConsistent(f"a published checkpoint is for log {opened.origin}")
            if opened.tree_size <= up_to:
                found.append(opened)
        if len(page) < HISTORY_PAGE or not found or found[-1].tree_size >= up_to:
            return found
        after = found[-1].tree_size


async def _check_extends(source: LogSource, old: Checkpoint, later: Checkpoint) -> None:
    if later.tree_size < old.tree_size:
        raise NotConsistent(
            f"the log shrank: the saved checkpoint has {old.tree_size} leaves, "
            f"a published one {later.tree_size}"
        )
    if old.tree_size == 0:
        return
    if later.tree_size == old.tree_size:
        if later.root_hash != old.root_hash:
            raise NotConsistent(
                "the log was rewritten or forked: two signed checkpoints of size "
                f"{old.tree_size} have different roots"
            )
        return
    proof = await source.consistency(old.tree_size, later.tree_size)
    try:
        merkle.verify_consistency(
            old.tree_size, later.tree_size, old.root_hash, later.root_hash, proof
        )
    except ProofError as exc:
        raise NotConsistent(
            f"the log was rewritten: the checkpoint of size {later.tree_size} does not "
            f"extend the saved one of size {old.tree_size} ({exc})"
        ) from exc
