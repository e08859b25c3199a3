"""Writing a tenant's bundle: the log brought up to date and checkpointed, then its leaves'
records streamed from one snapshot into a file, never all in memory."""

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from lineage.bundle import format as bundle
from lineage.core.errors import LogIntegrityError, NotFound
from lineage.core.progress import Progress, unwatched
from lineage.db.database import Database
from lineage.db.queries import QUERIES
from lineage.services import audit
from lineage.services.auth import Caller
from lineage.settings import Settings
from lineage.store.postgres import record_from_row
from lineage.verifiable_log import merkle, storage

FETCH_ROWS = 1000  # rows per round trip of the export's cursors: bounds its memory


@dataclass(frozen=True)
class Exported:
    path: Path
    tenant_id: str
    records: int
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
    verifier = str(storage.signing_key(settings).verifier)
    draft = path.with_name(f".{path.name}.{os.getpid()}.partial")
    texts = 0
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
                out.write(header.line(verifier, datetime.now(UTC)))
                query = QUERIES["bundle_records"]
                arguments = query.arguments({"tenant_id": tenant_id, "tree_size": tree_size})
                written = 0
                async for row in tx.connection.cursor(query.sql, *arguments, prefetch=FETCH_ROWS):
                    signature = None
                    if row["key_id"] is not None:
                        signature = {
                            "key_id": row["key_id"],
                            "signature": bundle.b64(row["signature"]),
                        }
                    canonical = record_from_row(row).canonical_bytes()
                    if merkle.leaf_hash(canonical) != row["leaf_hash"]:
                        raise LogIntegrityError(
                            f"record {row['context_id']} of tenant {tenant_id} was altered "
                            f"after it was logged (leaf {row['leaf_index']}): nothing exported"
                        )
                    out.write(
                        bundle.record_line(
                            row["leaf_index"], bytes(row["leaf_hash"]), signature, canonical
                        )
                    )
                    written += 1
                    if written % FETCH_ROWS == 0:
                        progress("export records", written, tree_size)
                progress("export records", written, tree_size)
                if written != tree_size:
                    raise LogIntegrityError(
                        f"the log of tenant {tenant_id} lists {written} of the {tree_size} "
                        "records its checkpoint covers: its tables were altered"
                    )
                if include_text:
                    query = QUERIES["bundle_texts"]
                    arguments = query.arguments({"tenant_id": tenant_id})
                    async for row in tx.connection.cursor(
                        query.sql, *arguments, prefetch=FETCH_ROWS
                    ):
                        out.write(
                            bundle.text_line(row["context_id"], row["text"], row["captured_at"])
                        )
                        texts += 1
                        if texts % FETCH_ROWS == 0:
                            progress("export texts", texts)
                    progress("export texts", texts)
            out.write(bundle.end_line(tree_size, texts))
        draft.replace(path)
    finally:
        draft.unlink(missing_ok=True)
    await audit.record(
        database,
        Caller(tenant_id, None, "admin"),
        "export_bundle",
        str(path),
        {"tree_size": tree_size, "texts": texts},
    )
    return Exported(path, tenant_id, tree_size, texts, tree_size, signed.checkpoint.root_hash)
