"""Writing a tenant's bundle: the log brought up to date and checkpointed, its tables' statistics
refreshed when the planner would plan on stale ones, then its leaves' records streamed from one
snapshot into a file, never all in memory. A leaf whose record
retention dropped goes as its hash only (a forget tombstone, kept past retention, whole), named
in an expiry note signed by the log's key."""

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from lineage.bundle import format as bundle
from lineage.core.errors import LogIntegrityError, NotFound
from lineage.core.progress import Progress, unwatched
from lineage.db.database import Database, Transaction
from lineage.db.named_sql import QUERIES
from lineage.services import audit
from lineage.services.auth import Caller
from lineage.services.records import record_from_row
from lineage.settings import Settings
from lineage.verifiable_log import merkle, storage

FETCH_ROWS = 1000  # rows per round trip of the export's cursors: bounds its memory
# Below this many leaves any plan is quick: the statistics are left to autovacuum.
ANALYZE_FROM = 1000


@dataclass(frozen=True)
class Exported:
    path: Path
    tenant_id: str
    records: int  # kept records, written whole
    expired: int  # leaves carried as hashes only
    texts: int
    tree_size: int
    root_hash: bytes


async def export_bundle(
    database: Database,
    settings: Settings,
    tenant_id: str,
    path: Path,
    *,
    include_text: bool,
    progress: Progress = unwatched,
) -> Exported:
    """Write the tenant's bundle to `path` (whole or not at all: a draft beside it is moved
    into place at the end). Signs a checkpoint as the service does, so run it where the
    service runs, with its log signing key, and as the owner (the bundle carries the tenant's
    text hash key)."""
    progress("sign a checkpoint")
    signed = await storage.checkpoint(database, settings, tenant_id)
    tree_size = signed.checkpoint.tree_size
    if await stale_statistics(database, tenant_id, tree_size):
        progress("analyze the log's tables (their statistics predate the log)")
        async with database.tenant(tenant_id) as tx:
            await tx.execute("bundle_export_analyze")
    key = storage.signing_key(settings)
    draft = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with draft.open("wb") as out:
            async with database.tenant(tenant_id) as tx:
                rows = await tx.fetch("bundle_tenant_settings")
                if not rows:
                    raise NotFound(f"no tenant {tenant_id!r}")
                settings_row = dict(rows[0])
                header = bundle.Header(
                    tenant_id=tenant_id,
                    checkpoint_note=signed.note,
                    records=tree_size,
                    texts=include_text,
                    settings={
                        **{name: settings_row[name] for name in bundle.SETTINGS},
                        "text_hash_key": bundle.b64(settings_row["text_hash_key"]),
                    },
                )
                out.write(header.line(str(key.verifier), datetime.now(UTC)))
                expired, newest_gone = await _write_leaves(tx, out, tree_size, progress)
                # Read after the records, whose partitions this transaction now holds.
                horizon = await tx.fetch("bundle_expired_before")
                expired_before = horizon[0]["expired_before"] if horizon else None
                if expired.count and expired_before is None:
                    raise LogIntegrityError(
                        f"{expired.count} records of tenant {tenant_id} are gone from its log's "
                        "leaves, but retention never expired any: its tables were altered"
                    )
                if newest_gone and expired_before and newest_gone[0] >= expired_before:
                    raise LogIntegrityError(
                        f"record {newest_gone[1]} of tenant {tenant_id} is gone from its log's "
                        f"leaves, but it was created {newest_gone[0]:%Y-%m-%d %H:%M:%S}Z and "
                        f"retention drops only what was created before "
                        f"{expired_before:%Y-%m-%d}: its tables were altered"
                    )
                texts = await _write_texts(tx, out, progress) if include_text else 0
            expiry_note = None
            if expired_before is not None:
                expiry_note = key.sign_text(expired.text(signed.checkpoint, expired_before))
            out.write(bundle.end_line(tree_size, texts, expired.count, expiry_note))
        draft.replace(path)
    finally:
        draft.unlink(missing_ok=True)
    await audit.record(
        database,
        Caller(tenant_id, None, "admin"),
        "export_bundle",
        str(path),
        {"tree_size": tree_size, "expired": expired.count, "texts": texts},
    )
    return Exported(
        path,
        tenant_id,
        tree_size - expired.count,
        expired.count,
        texts,
        tree_size,
        signed.checkpoint.root_hash,
    )


async def stale_statistics(database: Database, tenant_id: str, tree_size: int) -> list[str]:
    """The tables the export reads whose statistics count fewer rows (or, in provenance, fewer
    of the tenant's records) than half the log it is about to export: right after an import or
    a bulk load, whose sequencing filled log_leaves after any ANALYZE, the planner
    takes them for empty and picks a plan that took 328 s for 50,000 records instead of 8-13 s;
    a tenant bulk-loaded beside one the statistics knew looks like one record (255 s against
    1.9 s). The counts come from pg_class, which an ANALYZE updates at once, unlike the
    statistics views that lag their writers; the tenant's from the planner itself (EXPLAIN of
    sql/bundle_tenant_rows.sql)."""
    if tree_size < ANALYZE_FROM:
        return []
    query = QUERIES["bundle_tenant_rows"]
    async with database.tenant(tenant_id) as tx:
        rows = await tx.fetch("bundle_planned_rows")
        explained = await tx.connection.fetchval(
            f"EXPLAIN (FORMAT JSON) {query.sql}", *query.arguments({"tenant_id": tenant_id})
        )
    plan = (json.loads(explained) if isinstance(explained, str) else explained)[0]["Plan"]
    believed = {"provenance": _scanned_rows(plan)}  # its partitions' scans, summed
    return [
        row["table_name"]
        for row in rows
        if min(row["planned_rows"], believed.get(row["table_name"], tree_size)) < tree_size / 2
    ]


def _scanned_rows(plan: dict[str, Any]) -> float:
    """The rows the plan expects its table scans to give, all together."""
    own = plan["Plan Rows"] if "Relation Name" in plan else 0
    return own + sum(_scanned_rows(child) for child in plan.get("Plans", []))


async def _write_leaves(
    tx: Transaction, out: IO[bytes], tree_size: int, progress: Progress
) -> tuple[bundle.ExpiredLeaves, tuple[datetime, str] | None]:
    """A line per leaf of the tree, in leaf order: the record, or its hash if it expired. With
    the leaves written as expired, the newest created_at their leaves kept, and its record."""
    tenant_id = tx.tenant_id
    query = QUERIES["bundle_records"]
    arguments = query.arguments({"tenant_id": tenant_id, "tree_size": tree_size})
    written = 0
    expired = bundle.ExpiredLeaves()
    newest_gone: tuple[datetime, str] | None = None
    async for row in tx.connection.cursor(query.sql, *arguments, prefetch=FETCH_ROWS):
        written += 1
        if written % FETCH_ROWS == 0:
            progress("export records", written, tree_size)
        leaf_index = row["leaf_index"]
        if row["leaf_hash"] is None:
            raise LogIntegrityError(
                f"leaf {leaf_index} of the log of tenant {tenant_id} has no hash in its tree: "
                "its tables were altered"
            )
        leaf_hash = bytes(row["leaf_hash"])
        signature, canonical = None, b""
        if row["context_id"] is not None:  # kept, or a forget tombstone kept past retention
            if row["key_id"] is not None:
                signature = {"key_id": row["key_id"], "signature": bundle.b64(row["signature"])}
            canonical = record_from_row(row).canonical_bytes()
            if merkle.leaf_hash(canonical) != leaf_hash:
                raise LogIntegrityError(
                    f"record {row['context_id']} of tenant {tenant_id} was altered "
                    f"after it was logged (leaf {leaf_index}): nothing exported"
                )
        if not row["expired"]:
            out.write(bundle.record_line(leaf_index, leaf_hash, signature, canonical))
            continue
        context_id, roots = row["leaf_context_id"], row["inherited_roots"]
        created_at = row["leaf_created_at"]
        if created_at is not None and (newest_gone is None or created_at > newest_gone[0]):
            newest_gone = (created_at, context_id)
        tombstone = (signature, canonical) if canonical else None
        expired.add(leaf_index, context_id, roots, tombstone=tombstone is not None)
        out.write(
            bundle.expired_line(
                leaf_index, leaf_hash, context_id, row["has_kept_children"], roots, tombstone
            )
        )
    progress("export records", written, tree_size)
    if written != tree_size:
        raise LogIntegrityError(
            f"the log of tenant {tenant_id} lists {written} of the {tree_size} "
            "records its checkpoint covers: its tables were altered"
        )
    return expired, newest_gone


async def _write_texts(tx: Transaction, out: IO[bytes], progress: Progress) -> int:
    query = QUERIES["bundle_texts"]
    arguments = query.arguments({"tenant_id": tx.tenant_id})
    texts = 0
    async for row in tx.connection.cursor(query.sql, *arguments, prefetch=FETCH_ROWS):
        out.write(bundle.text_line(row["context_id"], row["text"], row["captured_at"]))
        texts += 1
        if texts % FETCH_ROWS == 0:
            progress("export texts", texts)
    progress("export texts", texts)
    return texts
