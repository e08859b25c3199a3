"""Each tenant's log in PostgreSQL: sequencing, proofs from stored subtrees, signed checkpoints.

Append path. The owner's function that inserts records (lineage_append) gives each its next
stream position in `events` in the same call, and the events past the tenant's
`log_heads.events_logged` are the log's queue: no round trip and no hashing for the writer, no
row written for the log alone, and no record appended by the service is committed unqueued.
Not a trigger (it was one until migration 0012): Citus keeps no trigger on a distributed table
with its default settings, and no transition table works on a shard.

Sequencer (as Trillian's, behind the append, in batches). Under the row lock of the tenant's
`log_heads` row, it takes the records of the oldest committed queued events, hashes each
record's canonical bytes (`ContextRecord.canonical_bytes`, read back from `provenance`, so what
is logged is exactly what a verifier later reads; a change made in the seconds before
sequencing is logged as it then stands), gives them the next leaf indexes, stores the
complete subtrees the new leaves complete (`merkle.completed_subtrees`, which needs only the old
tree's `frontier`) at the levels kept (`KEPT_EVERY`: the leaves' hashes on their rows, every
fourth level above in `log_nodes`), and advances the head and `events_logged` past them, in one
transaction.
The lock makes concurrent sequencers take turns, and the queue is read once the lock is held,
so each sees what the previous one committed; the primary key of `log_leaves` and its unique
(tenant_id, context_id) make a duplicate or a reused index fail rather than pass. Leaves follow
stream order, and positions commit in order (the append takes its tenant's counter last), so a
record's leaf comes after those of every record committed before it was appended, its parents
from earlier appends among them.

Proofs read the O(log n) subtree hashes `merkle.inclusion_proof_nodes` /
`consistency_proof_nodes` name, each folded from at most 8 kept ones (`kept_under`), one
primary-key probe each, in one query.

Each sequencing transaction takes at most `log_step_leaves` queued records, so the lock is held
for one bounded step. Checkpoints are signed on demand (`checkpoint`: `lineage log checkpoint`
integrates the whole queue first; `GET /v1/log/checkpoint`, which any read key may ask, at most
one step, so a backlog of any size costs a reader one step, and the answer says how many records
are still queued) and by the background task in each round that finds queued records (it
drains the queue a step per transaction; `lineage_log_queued_records` in /metrics shows what is
left).
Before signing, under the same lock, it checks that the stored frontier hashes to the head's
root, that the last checkpoint was signed by this same key, and that a consistency proof from
it verifies: if the stored tree no longer extends what was signed, nothing is signed
(`LogIntegrityError`). The stored checkpoints are in the database, which a superuser can
rewrite whole; so each signer also keeps the newest checkpoint it signed for each log in a
witness file beside its signing key (`witness_path`) and refuses a tree that does not extend
it (a shorter one, or one of the same size with another root). Each signing checks against the
last one, so every checkpoint a signer ever signed is consistent with the next.

Records are queued by the call that appends them (lineage_append); a record
COPYed in around it (the benchmark's bulk load) never joins the log. `log_interval_s = 0` turns
the background rounds off.
"""

import asyncio
import hashlib
import logging
import os
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from lineage import db
from lineage.core import metrics, tasks
from lineage.core.errors import (
    BadParameter,
    CheckpointError,
    LineageError,
    LogIntegrityError,
    NotFound,
    ProofError,
)
from lineage.core.record import ContextRecord
from lineage.db.database import Database, Transaction
from lineage.services import postings_merge, statistics
from lineage.services.records import record_from_row
from lineage.settings import Settings
from lineage.verifiable_log import merkle
from lineage.verifiable_log.checkpoint import Checkpoint, SigningKey, load_signing_key, origin_for

log = logging.getLogger(__name__)
# What each refusal to sign tells its caller to do.
RECOVERY = "; an operator recovers the log as runbooks/backup.md says"

Node = tuple[int, int]
# The subtree hashes kept: each leaf's (on its log_leaves row) and those of every fourth level
# above (log_nodes); any other is folded from the at most 8 kept ones under it. The log then
# keeps a sixteenth of a row a leaf beside the leaf's own row, not two rows.
KEPT_EVERY = 4


@dataclass(frozen=True)
class TreeHead:
    tree_size: int
    root_hash: bytes


@dataclass(frozen=True)
class InclusionProof:
    """What a verifier needs to check that a record is in a tree of ``tree_size`` leaves."""

    record: ContextRecord | None  # None: gone from the store; its leaf is still in the tree
    leaf_index: int
    tree_size: int
    leaf_hash: bytes  # as the log holds it; a verifier recomputes its own from `record`
    proof: list[bytes]
    # Where the record is gone: the tenant's expiry horizon (retention dropped what was created
    # before it), None where retention never dropped any of the tenant's records...
    expired_before: datetime | None = None
    # ...and the record's created_at as its leaf kept it (None: logged before migration 0023).
    created_at: datetime | None = None

    @property
    def expired(self) -> bool:
        """Gone from the store as retention drops records: created before the tenant's expiry
        horizon. A record gone otherwise was removed around the service."""
        return (
            self.record is None
            and self.expired_before is not None
            and (self.created_at is None or self.created_at < self.expired_before)
        )


@dataclass(frozen=True)
class SignedCheckpoint:
    checkpoint: Checkpoint
    note: str  # the signed text, exactly as stored and served
    queued: int = 0  # the tenant's records appended but not yet in it, when it was served


def signing_key_path(settings: Settings) -> Path:
    return settings.log_signing_key_file or settings.data_dir / "log-signing-key.pem"


def signing_key(settings: Settings) -> SigningKey:
    return load_signing_key(signing_key_path(settings), settings.log_origin, create=True)


async def witness_path(connection: asyncpg.Connection, settings: Settings, tenant_id: str) -> Path:
    """Where this signer keeps the newest checkpoint it signed for the tenant's log in this
    database (server, port and database name: another database's log is another log)."""
    where = await connection.fetchval(
        "SELECT concat_ws('/', inet_server_addr(), inet_server_port(), current_database())"
    )
    name = hashlib.sha256(f"{where}\x00{tenant_id}".encode()).hexdigest()[:32]
    return signing_key_path(settings).parent / "log-witness" / f"{name}.note"


def _read_witness(path: Path, key: SigningKey) -> Checkpoint | None:
    try:
        note = path.read_text()
    except FileNotFoundError:
        return None
    try:
        return key.verifier.open(note)
    except CheckpointError as exc:
        raise LogIntegrityError(
            f"the signer's witness does not open with its key{RECOVERY}", f" ({path}: {exc})"
        ) from exc


def _write_witness(path: Path, note: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_suffix(f".{os.getpid()}.draft")
    draft.write_text(note)
    os.replace(draft, path)


async def sequence(database: Database, tenant_id: str, *, max_steps: int | None = None) -> TreeHead:
    """Integrate the records queued so far into the tenant's tree, `log_step_leaves` of them per
    transaction (each holds the log's lock that long), in at most `max_steps` transactions
    (None: until the queue is empty)."""
    step = database.settings.log_step_leaves
    steps = 0
    while True:
        async with database.tenant(tenant_id) as tx:
            head, taken = await _sequence_batch(tx, step)
            queued = await _queued(tx)
        metrics.set_log_queued(tenant_id, queued)
        steps += 1
        if taken < step or (max_steps is not None and steps >= max_steps):
            return head


async def _queued(tx: Transaction) -> int:
    [row] = await tx.fetch("log_queued_count")
    return int(row["queued"])


async def _sequence_batch(tx: Transaction, step: int) -> tuple[TreeHead, int]:
    [locked] = await tx.fetch("log_lock_head", tenant_token=tx.token)
    old_size = locked["tree_size"]
    rows = await tx.fetch("log_queued_records", batch_size=step)
    if not rows:
        return TreeHead(old_size, locked["root_hash"]), 0
    # ~30 us of canonical form per record: off the event loop, so requests keep flowing.
    leaves = await asyncio.to_thread(_leaf_hashes, rows)
    frontier = await _stored(tx, merkle.frontier(old_size))
    made = merkle.completed_subtrees(frontier, old_size, leaves)
    new_size = old_size + len(rows)
    root = merkle.root_from_subtrees({**frontier, **made}, new_size)
    kept = [node for node in made if node[0] % KEPT_EVERY == 0]
    await tx.execute(
        "log_advance",
        tenant_token=tx.token,
        old_size=old_size,
        context_ids=[row["context_id"] for row in rows],
        created_ats=[row["created_at"] for row in rows],
        levels=[level for level, _ in kept],
        node_indexes=[index for _, index in kept],
        hashes=[made[node] for node in kept],
        root_hash=root,
    )
    return TreeHead(new_size, root), len(rows)


def _leaf_hashes(rows: Sequence[asyncpg.Record]) -> list[bytes]:
    return [merkle.leaf_hash(record_from_row(row).canonical_bytes()) for row in rows]


def kept_under(node: Node) -> list[Node]:
    """The kept subtrees a complete subtree's hash is folded from, left to right: itself when
    its level is kept."""
    level, index = node
    below = level % KEPT_EVERY
    return [(level - below, i) for i in range(index << below, (index + 1) << below)]


async def _stored(tx: Transaction, nodes: Iterable[Node]) -> dict[Node, bytes]:
    """The hashes of these complete subtrees, each read or folded from the kept ones under it:
    all of them, or LogIntegrityError."""
    wanted = {node: kept_under(node) for node in nodes}
    read = list(dict.fromkeys(piece for pieces in wanted.values() for piece in pieces))
    rows = await tx.fetch(
        "log_nodes",
        levels=[level for level, _ in read],
        node_indexes=[index for _, index in read],
    )
    found = {(row["level"], row["node_index"]): bytes(row["hash"]) for row in rows}
    missing = [node for node in read if node not in found]
    if missing:
        raise LogIntegrityError(
            f"the log of tenant {tx.tenant_id} lacks stored subtrees {missing[:5]} "
            "(level, index): its tables were altered"
        )
    # A complete subtree is the MTH of its 2**k subtrees one level k below, taken as leaves.
    return {
        node: merkle.root_hash([found[piece] for piece in pieces])
        for node, pieces in wanted.items()
    }


async def _proof(tx: Transaction, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    """The MTH of each range, folded from its stored complete-subtree pieces."""
    pieces = [[merkle.subtree_node(*piece) for piece in merkle.subtree_ranges(*r)] for r in ranges]
    stored = await _stored(tx, (node for nodes in pieces for node in nodes))
    return [merkle.fold_subtrees([stored[node] for node in nodes]) for nodes in pieces]


async def _head(tx: Transaction) -> TreeHead:
    rows = await tx.fetch("log_head")
    if not rows:
        return TreeHead(0, merkle.EMPTY_ROOT)
    return TreeHead(rows[0]["tree_size"], bytes(rows[0]["root_hash"]))


def _check_size(name: str, size: int, head: TreeHead) -> None:
    if not 1 <= size <= head.tree_size:
        raise BadParameter(
            f"{name} must be between 1 and {head.tree_size}, the number of records in the log "
            "now (take sizes from checkpoints)"
        )


async def inclusion(
    database: Database, tenant_id: str, context_id: str, tree_size: int
) -> InclusionProof:
    """The record and its inclusion proof in the tenant's tree of ``tree_size`` leaves."""
    async with database.tenant(tenant_id) as tx:
        rows = await tx.fetch("log_leaf", context_id=context_id)
        if not rows:
            raise NotFound(f"no context {context_id}")
        _check_size("tree_size", tree_size, await _head(tx))
        index = rows[0]["leaf_index"]
        if index is None and rows[0]["queued"]:
            raise BadParameter(
                f"context {context_id} is not in the log yet: it is queued; a new checkpoint "
                "(GET /v1/log/checkpoint) integrates it"
            )
        if index is None:
            raise BadParameter(
                f"context {context_id} is stored but has no leaf in the log and is not queued: "
                "its leaf was removed, or it was written around the service; no checkpoint "
                "can prove it (runbooks/backup.md says how to recover the log)"
            )
        if index >= tree_size:
            raise BadParameter(
                f"context {context_id} is leaf {index}, outside a tree of size {tree_size}: "
                "it was logged after that checkpoint; use a newer one"
            )
        [leaf] = (await _stored(tx, [(0, index)])).values()
        proof = await _proof(tx, merkle.inclusion_proof_nodes(index, tree_size))
        if rows[0]["context_id"] is not None:
            return InclusionProof(record_from_row(rows[0]), index, tree_size, leaf, proof)
        horizon = await tx.fetch("bundle_expired_before")
    expired_before = horizon[0]["expired_before"] if horizon else None
    return InclusionProof(
        None, index, tree_size, leaf, proof, expired_before, rows[0]["created_at"]
    )


async def consistency(database: Database, tenant_id: str, first: int, second: int) -> list[bytes]:
    """Proof that the tenant's tree of ``second`` leaves extends its tree of ``first``."""
    async with database.tenant(tenant_id) as tx:
        head = await _head(tx)
        _check_size("second", second, head)
        if not 1 <= first <= second:
            raise BadParameter(f"first must be between 1 and second ({second})")
        return await _proof(tx, merkle.consistency_proof_nodes(first, second))


async def checkpoint(
    database: Database, settings: Settings, tenant_id: str, *, max_steps: int | None = None
) -> SignedCheckpoint:
    """Integrate the tenant's queued records (in at most `max_steps` steps; None: all of them)
    and return its newest checkpoint, signing one if the tree grew since the last. With every
    step taken it covers every record committed before the call; else `queued` says how many
    it leaves out, which the background round integrates."""
    await sequence(database, tenant_id, max_steps=max_steps)
    key = signing_key(settings)
    async with database.tenant(tenant_id) as tx:
        [locked] = await tx.fetch("log_lock_head", tenant_token=tx.token)
        head = TreeHead(locked["tree_size"], bytes(locked["root_hash"]))
        queued = await _queued(tx)
        metrics.set_log_queued(tenant_id, queued)
        witness = await witness_path(tx.connection, settings, tenant_id)
        try:
            await _check_witnessed(tx, head, witness, key)
            latest = await tx.fetch("log_latest_checkpoint")
            if latest and latest[0]["tree_size"] == head.tree_size:
                note = latest[0]["note"]
                return SignedCheckpoint(Checkpoint.from_note(note), note, queued)
            await _check_extends(tx, head, latest[0] if latest else None, key)
        except LogIntegrityError as exc:
            # Whoever asked (a reader, the background round, the CLI), an operator must know.
            log.error("verifiable log: %s", exc)
            metrics.count_checkpoint_refused()
            raise
        made = Checkpoint(
            origin_for(settings.log_origin, tenant_id),
            head.tree_size,
            head.root_hash,
            datetime.now(UTC),
        )
        note = key.sign(made)
        await tx.execute(
            "log_save_checkpoint",
            tree_size=made.tree_size,
            root_hash=made.root_hash,
            signed_at=made.time,
            note=note,
        )
        _write_witness(witness, note)
    return SignedCheckpoint(made, note, queued)


async def _check_witnessed(tx: Transaction, head: TreeHead, path: Path, key: SigningKey) -> None:
    """Refuse a tree whose stored subtrees do not hash to its head's root, or that does not
    extend the newest checkpoint this signer signed."""
    stored = await _stored(tx, merkle.frontier(head.tree_size))
    if merkle.root_from_subtrees(stored, head.tree_size) != head.root_hash:
        raise LogIntegrityError(
            f"the stored tree of tenant {tx.tenant_id} does not hash to its head's root; "
            f"refusing to sign a checkpoint{RECOVERY}"
        )
    signed = _read_witness(path, key)
    if signed is None or signed.tree_size == 0:
        return
    restored = (
        f" (witness {path}); if the database was restored from a backup older than that "
        f"checkpoint, the restore dropped records that were logged: move {path} aside to sign "
        "the log as it is"
    )
    if head.tree_size < signed.tree_size:
        raise LogIntegrityError(
            f"the log of tenant {tx.tenant_id} has {head.tree_size} leaves, but this signer signed "
            f"a checkpoint of {signed.tree_size}; refusing to sign{RECOVERY}",
            restored,
        )
    if head.tree_size == signed.tree_size:
        consistent = head.root_hash == signed.root_hash
    else:
        proof = await _proof(tx, merkle.consistency_proof_nodes(signed.tree_size, head.tree_size))
        try:
            merkle.verify_consistency(
                signed.tree_size, head.tree_size, signed.root_hash, head.root_hash, proof
            )
            consistent = True
        except ProofError:
            consistent = False
    if not consistent:
        raise LogIntegrityError(
            f"the stored tree of tenant {tx.tenant_id} (size {head.tree_size}) does not extend the "
            f"checkpoint of size {signed.tree_size} this signer signed: the log's tables were "
            f"rewritten; refusing to sign a fork{RECOVERY}",
            restored,
        )


async def checkpoint_history(
    database: Database, tenant_id: str, after: int, limit: int
) -> list[str]:
    """The tenant's signed checkpoint notes larger than `after`, oldest first."""
    async with database.tenant(tenant_id) as tx:
        rows = await tx.fetch("log_checkpoints", after=after, limit=limit)
    return [row["note"] for row in rows]


async def _check_extends(
    tx: Transaction,
    head: TreeHead,
    previous: Any,
    key: SigningKey,
) -> None:
    """Refuse to sign unless the stored tree extends the last checkpoint, which this same key
    signed."""
    if previous is None:
        return
    try:
        key.verifier.open(previous["note"])
    except CheckpointError as exc:
        raise LogIntegrityError(
            f"the last checkpoint of tenant {tx.tenant_id} was not signed by this process's key "
            f"{key.verifier} ({exc}): point LINEAGE_LOG_SIGNING_KEY_FILE at the log's key"
        ) from exc
    if previous["tree_size"] == 0:
        return
    old_size, old_root = previous["tree_size"], bytes(previous["root_hash"])
    if old_size > head.tree_size:
        raise LogIntegrityError(
            f"the log of tenant {tx.tenant_id} has {head.tree_size} leaves but a checkpoint "
            f"already covers {old_size}; refusing to sign a shorter log{RECOVERY}"
        )
    proof = await _proof(tx, merkle.consistency_proof_nodes(old_size, head.tree_size))
    try:
        merkle.verify_consistency(old_size, head.tree_size, old_root, head.root_hash, proof)
    except ProofError as exc:
        raise LogIntegrityError(
            f"the stored tree of tenant {tx.tenant_id} does not extend its checkpoint of size "
            f"{old_size} ({exc}); refusing to sign a checkpoint{RECOVERY}"
        ) from exc


async def latest_checkpoint(database: Database, tenant_id: str) -> SignedCheckpoint:
    """The tenant's newest signed checkpoint, as stored: reading it signs nothing."""
    async with database.tenant(tenant_id) as tx:
        rows = await tx.fetch("log_latest_checkpoint")
    if not rows:
        raise NotFound(
            f"tenant {tenant_id} has no checkpoint yet: the service signs one within "
            "LINEAGE_LOG_INTERVAL_S, or run `lineage log checkpoint` where it runs"
        )
    return SignedCheckpoint(Checkpoint.from_note(rows[0]["note"]), rows[0]["note"])


async def run_once(database: Database, settings: Settings) -> None:
    """One background round: the tenant tables' statistics refreshed if a tenant outgrew them
    (first, so that sequencing a grown tenant's backlog plans on them), then every tenant with
    queued records is sequenced and checkpointed, then the new records' small postings rows
    merged (lineage.services.postings_merge)."""
    await statistics.follow_growth_safely(database)
    async with database.connection() as connection:
        tenants = [row["tenant_id"] for row in await db.fetch(connection, "log_pending_tenants")]
    for tenant_id in tenants:
        try:
            await checkpoint(database, settings, tenant_id)
        except LogIntegrityError:
            pass  # logged and counted by checkpoint(); the next round finds it again
        except (LineageError, asyncpg.PostgresError, OSError):
            # Degrade open: the records are safe in the queue; the next round retries.
            log.exception("verifiable log of tenant %s: sequencing or signing failed", tenant_id)
    await postings_merge.merge_pending_safely(database)


@asynccontextmanager
async def background(database: Database, settings: Settings) -> AsyncIterator[None]:
    """Run `run_once` every `log_interval_s` seconds while the block runs (never when it is 0)."""
    if not settings.log_interval_s:
        yield
        return

    async def loop() -> None:
        while True:
            await asyncio.sleep(settings.log_interval_s)
            try:
                await run_once(database, settings)
            except Exception:  # the task must outlive any one failure; records wait queued
                if tasks.cancelled():
                    raise
                log.exception("verifiable log: background round failed; retrying next round")

    task = asyncio.create_task(loop(), name="verifiable-log")
    try:
        yield
    finally:
        await tasks.stop(task)
