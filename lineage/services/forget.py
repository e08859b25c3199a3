"""Right to be forgotten: `lineage forget --source-uri URI` and `POST /v1/forget`.

In one transaction, so nothing is half-done in lineage (the vector stores are outside it):

1. walk the whole blast radius of every record with the source_uri (sql/blast_radius_by_source,
   every kind); a walk cut short by max_depth is refused and nothing is written;
2. delete from each vector store registered for the tenant (lineage.vector_stores) the vectors
   of every chunk and embedding in the radius, and check that none remain: a receipt per store
   (lineage.services.vector_sinks). A store that fails is reported, the rest goes on, and the
   answer is not `complete`: running the forget again finishes that store;
3. purge the captured text (context_text) of every record in it;
4. append `tombstone` records, children of the forgotten records with that source_uri (at
   most record.MAX_PARENTS each), saying what was forgotten: a keyed hash of the URI (it may
   itself be personal), the counts and the stores' receipts, signed as every record is (so
   `lineage verify-record` proves them); their created_at says when;
5. append an audit record (`forget`).

A dry run walks and asks each store which vectors it holds, and changes nothing (audited as
`forget_dry_run`).

It returns every affected id with its kind, for the owners of the other downstream stores
(caches, unregistered indexes). Provenance stays as it was: it holds no text, and it is
append-only. What it still holds is said in the answer (`remaining`, `Remaining`): the
forgotten records' plain source_uri and plain `sha256:` document hashes (anyone with the bytes
can confirm them), their attributes and the ids, edges and metadata of every affected record;
tombstones and the audit record keep only the URI's keyed hash. A rerun that finds no text left
to purge, every record already tombstoned and no vector left writes no tombstone and says so
(it is still audited).
"""

import json
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
from pydantic import Field

from lineage.core.body import Body
from lineage.core.derive import Derivation, derive_many
from lineage.core.errors import BadParameter, NotFound, WalkTimeout
from lineage.core.hashing import HmacSha256
from lineage.core.progress import Progress, unwatched
from lineage.core.record import MAX_PARENTS
from lineage.db.database import Database, Transaction
from lineage.services import audit, reads, walks
from lineage.services.auth import Caller
from lineage.services.privacy import text_hash_key
from lineage.services.transaction_store import TransactionStore
from lineage.services.vector_sinks import StoreReceipt, clear
from lineage.settings import Settings
from lineage.vector_stores import VectorStore, registered

__all__ = ["FORGET_TRANSFORM", "Forgotten", "Remaining", "forget"]

FORGET_TRANSFORM = "forget"
FORGET_VERSION = "1"
# The records whose vectors the stores hold (lineage.vector_stores says how they are keyed).
VECTOR_KINDS = frozenset({"chunk", "embedding"})


class Forgotten(Body):
    remaining: dict[str, Any] = Field(
        description="what provenance still holds: records whose source_uri reads the URI, "
        "with plain sha256 hashes, with attributes, and all kept"
    )
    source_uri_hash: str  # keyed (hmacsha256), as the tombstones and the audit record hold it
    total: int
    counts_by_kind: dict[str, int]
    affected: list[dict[str, Any]]  # context_id, kind, depth: for the downstream stores
    purged_text_ids: list[str]  # ids whose captured text was deleted now
    tombstone_ids: list[str]
    vector_stores: list[StoreReceipt]  # one receipt per registered store, in the registry's order
    complete: bool  # false when a store failed: run the forget again to finish it
    dry_run: bool  # then nothing was purged, deleted or appended
    nothing_left: bool  # false on a dry run
    forgotten_at: str
    summary: str


@dataclass(frozen=True)
class Remaining:
    """What a forget leaves readable in provenance (append-only, so never rewritten): said in
    every answer so that no one reads "forgotten" as "gone"."""

    source_uri_records: int  # records whose source_uri column still reads the URI in plain
    plain_hash_records: int  # of those, content hashes in plain sha256 (confirmable by bytes)
    records_with_attributes: int  # affected records whose attributes are kept as they were
    records_kept: int  # every affected record: id, kind, edges, transform, trace id, times
    why: str = (
        "provenance is append-only and holds no text; the URI, plain document "
        "hashes and attributes cannot be redacted from it"
    )

    def summary(self) -> str:
        return (
            f"the URI stays readable on {self.source_uri_records} records "
            f"({self.plain_hash_records} with a plain sha256 content hash), and the ids, "
            f"edges and metadata of all {self.records_kept} "
            f"({self.records_with_attributes} with attributes)"
        )


def _forgotten(
    uri_hash: str,
    affected: list[dict[str, Any]],
    purged: list[str],
    tombstones: list[str],
    remaining: Remaining,
    receipts: list[StoreReceipt],
    *,
    dry_run: bool,
) -> Forgotten:
    if dry_run:
        summary = (
            f"dry run, nothing changed: {len(affected)} records would be forgotten"
            f"{_stores_summary(receipts)}"
        )
    elif purged or tombstones:
        summary = (
            f"forgotten: {len(affected)} records listed for the downstream stores, "
            f"{len(purged)} captured texts purged, {len(tombstones)} tombstones "
            f"appended{_stores_summary(receipts)}; provenance kept: {remaining.summary()}"
        )
    else:
        summary = (
            f"nothing left to purge: the {len(affected)} records of this source_uri "
            "hold no captured text and were already tombstoned"
            f"{_stores_summary(receipts)}"
        )
    return Forgotten(
        remaining=asdict(remaining),
        source_uri_hash=uri_hash,
        forgotten_at=datetime.now(UTC).isoformat(),
        vector_stores=receipts,
        complete=all(receipt.status != "failed" for receipt in receipts),
        dry_run=dry_run,
        nothing_left=not dry_run and not purged and not tombstones,
        summary=summary,
        total=len(affected),
        counts_by_kind=dict(sorted(Counter(node["kind"] for node in affected).items())),
        affected=affected,
        purged_text_ids=purged,
        tombstone_ids=tombstones,
    )


def _stores_summary(receipts: list[StoreReceipt]) -> str:
    said = {
        "deleted": "vectors of {n} ids deleted",
        "already_absent": "no vector left",
        "would_delete": "vectors of {n} ids would be deleted",
        "failed": "FAILED ({error}), run the forget again to finish it",
    }
    return "".join(
        f"; vector store {r.store}: " + said[r.status].format(n=len(r.found), error=r.error)
        for r in receipts
    )


def _remaining(nodes: list[dict[str, Any]], source_uri: str) -> Remaining:
    sources = [node for node in nodes if node["source_uri"] == source_uri]
    kept = [node for node in nodes if node["kind"] != "tombstone"]
    return Remaining(
        source_uri_records=len(sources),
        plain_hash_records=sum(1 for n in sources if n["content_hash"].startswith("sha256:")),
        records_with_attributes=sum(1 for node in kept if node["attributes"]),
        records_kept=len(kept),
    )


async def forget(
    database: Database,
    settings: Settings,
    caller: Caller,
    source_uri: str,
    max_depth: int | None = None,
    *,
    dry_run: bool = False,
    progress: Progress = unwatched,
) -> Forgotten:
    """Run the right-to-be-forgotten flow for `source_uri` in the caller's tenant.

    Raises NotFound when no record has that source_uri, BadParameter when max_depth cuts the
    blast radius short, WalkTimeout past the statement timeout, VectorStoreRegistryError when
    the registry of vector stores is unusable; in each case nothing is written or deleted.
    A failing vector store raises nothing: its receipt says so and `complete` is false.
    """
    depth = walks.check_depth(settings, max_depth)
    tenant_id = caller.tenant_id
    stores = registered(settings, tenant_id)
    sink = Sink(stores, settings.vector_store_timeout_s, dry_run)
    try:
        async with database.tenant(
            tenant_id, statement_timeout_ms=settings.statement_timeout_ms
        ) as tx:
            return await _forget(tx, caller, source_uri, depth, sink, progress)
    except asyncpg.QueryCanceledError as exc:
        stores_note = " (vector stores may have deleted theirs: a new run reports them)"
        raise WalkTimeout(
            f"forget ran past the {settings.statement_timeout_ms} ms statement timeout and "
            f"wrote nothing{stores_note if stores and not dry_run else ''}; raise "
            "LINEAGE_STATEMENT_TIMEOUT_MS for this request"
        ) from exc


@dataclass(frozen=True)
class Sink:
    """Where the forget's vectors go, and whether it only looks."""

    stores: list[VectorStore]
    timeout_s: float
    dry_run: bool

    async def clear(self, nodes: list[dict[str, Any]], progress: Progress) -> list[StoreReceipt]:
        ids = sorted({node["context_id"] for node in nodes if node["kind"] in VECTOR_KINDS})
        receipts = []
        for done, store in enumerate(self.stores, start=1):
            progress("clear the vector stores", done - 1, len(self.stores))
            receipts.append(await clear(store, ids, dry_run=self.dry_run, timeout_s=self.timeout_s))
            progress("clear the vector stores", done, len(self.stores))
        return receipts


async def _forget(
    tx: Transaction,
    caller: Caller,
    source_uri: str,
    depth: int,
    sink: Sink,
    progress: Progress,
) -> Forgotten:
    progress("walk the blast radius")
    nodes = [
        reads.node_from_row(row)
        for row in await tx.fetch(
            "blast_radius_by_source",
            source_uri=source_uri,
            kind="all",
            max_depth=depth,
        )
    ]
    if not nodes:
        raise NotFound("no record in this tenant has that source_uri; nothing was forgotten")
    if any(node["truncated"] for node in nodes):
        raise BadParameter(
            f"the blast radius goes deeper than max_depth {depth}, so the list would be "
            "incomplete; nothing was forgotten. Run again with a larger max_depth"
        )
    roots = [node["context_id"] for node in nodes if node["source_uri"] == source_uri]
    earlier = [node for node in nodes if node["transform"] == FORGET_TRANSFORM]
    tombstoned = {parent for node in earlier for parent in node["parent_ids"]}
    affected = [
        {"context_id": node["context_id"], "kind": node["kind"], "depth": node["depth"]}
        for node in nodes
        if node["kind"] != "tombstone"
    ]
    progress("walk the blast radius", len(nodes), len(nodes))
    # Before anything is written here: no lock of this transaction waits on a store.
    receipts = await sink.clear(nodes, progress)
    # The URI may itself be personal: tombstones and the audit keep only its keyed hash.
    uri_hasher = HmacSha256(await text_hash_key(tx))
    uri_hash = f"{uri_hasher.name}:{uri_hasher.hexdigest(source_uri.encode())}"
    if sink.dry_run:
        forgotten = _forgotten(
            uri_hash, affected, [], [], _remaining(nodes, source_uri), receipts, dry_run=True
        )
        await audit.append(
            tx,
            caller.key_id,
            "forget_dry_run",
            uri_hash,
            {"total": len(affected), "vector_stores": [r.facts() for r in receipts]},
        )
        return forgotten
    progress("purge captured text")
    purged = [
        row["context_id"]
        for row in await tx.fetch(
            "forget_purge_text",
            context_ids=[node["context_id"] for node in nodes],
        )
    ]
    progress("purge captured text", len(purged))
    progress("append tombstones")
    tombstones: list[str] = []
    stores_acted = any(receipt.status in ("deleted", "failed") for receipt in receipts)
    if purged or stores_acted or not tombstoned.issuperset(roots):
        tombstones = await _append_tombstones(tx, roots, uri_hash, affected, purged, receipts)
    progress("append tombstones", len(tombstones))
    forgotten = _forgotten(
        uri_hash,
        affected,
        purged,
        tombstones,
        _remaining(nodes, source_uri),
        receipts,
        dry_run=False,
    )
    await audit.append(
        tx,
        caller.key_id,
        "forget",
        uri_hash,
        {
            "total": len(affected),
            "counts_by_kind": forgotten.counts_by_kind,
            "purged_texts": len(purged),
            "tombstone_ids": tombstones,
            "vector_stores": [receipt.facts() for receipt in receipts],
        },
    )
    return forgotten


async def _append_tombstones(
    tx: Transaction,
    roots: list[str],
    uri_hash: str,
    affected: list[dict[str, Any]],
    purged: list[str],
    receipts: list[StoreReceipt],
) -> list[str]:
    parts = [roots[start : start + MAX_PARENTS] for start in range(0, len(roots), MAX_PARENTS)]
    facts = {
        "forgotten": "source_uri",
        "source_uri_hash": uri_hash,
        "records": len(affected),
        "counts_by_kind": dict(sorted(Counter(node["kind"] for node in affected).items())),
        "purged_texts": len(purged),
        "parts": len(parts),
    }
    if receipts:
        facts["vector_stores"] = [receipt.facts() for receipt in receipts]
    items = [
        Derivation(
            part,
            # What the tombstone's content hash covers: its facts and its own share of parents.
            json.dumps(facts | {"part": number, "roots": part}, sort_keys=True),
            "tombstone",
            FORGET_TRANSFORM,
            FORGET_VERSION,
            attributes=facts | {"part": number},
        )
        for number, part in enumerate(parts, start=1)
    ]
    return [context.context_id for context in await derive_many(TransactionStore(tx), items)]
