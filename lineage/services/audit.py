"""Audit: who (key id) walked, exported, verified or forgot what, and when; append-only.

Audit rows are written to the primary, also for reads served by a replica, all through
`record`. When the primary cannot take one (down, unreachable, read-only, slow), the request
goes on and the row waits in a local spool (`<data_dir>/audit-spool/<pid>.jsonl`, fsync'd
before the request is answered) with the time of the request; `drain` writes spooled rows (the
service tries every few seconds) and removes them once committed. A crash between that commit
and the removal writes them twice: rows are never lost, at worst repeated.
"""

import asyncio
import contextlib
import fcntl
import json
import logging
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lineage.core import cursors, metrics
from lineage.db.database import PENDING_WRITE, Database, PendingWrite, Transaction
from lineage.db.errors import PRIMARY_TIMEOUT_S, PRIMARY_UNAVAILABLE
from lineage.services.auth import Caller
from lineage.settings import Settings

log = logging.getLogger(__name__)

DRAIN_INTERVAL_S = 5.0


async def append(
    tx: Transaction,
    key_id: str | None,
    action: str,
    target: str | None,
    detail: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> None:
    """One audit row inside the caller's transaction; `at` None means now."""
    await tx.execute("audit_append", **values(key_id, action, target, detail, at))


def values(
    key_id: str | None,
    action: str,
    target: str | None,
    detail: dict[str, Any] | None = None,
    at: datetime | None = None,
) -> dict[str, Any]:
    """The named query audit_append's values but the tenant's."""
    return {
        "key_id": key_id or "",
        "action": action,
        "target": target or "",
        "detail": detail or {},
        "at": at,
    }


@contextlib.asynccontextmanager
async def ride_along(
    database: Database,
    caller: Caller,
    action: str,
    target: str | None,
    detail: dict[str, Any] | None = None,
) -> AsyncIterator[None]:
    """Audit the work inside: the row is written by its first transaction of the caller's
    tenant on the primary, with that work; when none committed (a failed walk, a replica's
    read), alone (`record`) once the work is over."""
    row = PendingWrite(
        caller.tenant_id, "audit_append", values(caller.key_id, action, target, detail)
    )
    PENDING_WRITE.set(row)
    try:
        yield
    finally:
        if not row.written:
            row.written = True
            await record(database, caller, action, target, detail)


def spool_dir(settings: Settings) -> Path:
    return settings.data_dir / "audit-spool"


async def record(
    database: Database,
    caller: Caller,
    action: str,
    target: str | None,
    detail: dict[str, Any] | None = None,
) -> None:
    """Append one audit row on the primary in its own transaction, so a failed request is
    audited too. A primary that cannot take the row within PRIMARY_TIMEOUT_S (down, slow, a
    standby) does not fail the caller: the row waits in the spool (`spool_dir` of the
    database's settings) until `drain` writes it."""
    at = datetime.now(UTC)
    try:
        async with asyncio.timeout(PRIMARY_TIMEOUT_S):
            async with database.tenant(caller.tenant_id) as tx:
                await append(tx, caller.key_id, action, target, detail)
    except PRIMARY_UNAVAILABLE as exc:
        log.warning("audit row spooled, the primary did not take it: %r", exc)
        metrics.count_degraded("audit_spooled")
        entry = {
            "tenant_id": caller.tenant_id,
            "key_id": caller.key_id,
            "action": action,
            "target": target,
            "detail": detail or {},
            "at": at.isoformat(),
        }
        await asyncio.to_thread(_spool, spool_dir(database.settings), entry)


def _spool(directory: Path, entry: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{os.getpid()}.jsonl"
    with path.open("a", encoding="utf-8") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        file.write(json.dumps(entry) + "\n")
        file.flush()
        os.fsync(file.fileno())


def spooled_entries(settings: Settings) -> int:
    """Audit rows waiting in the spool (of every process sharing the data folder)."""
    directory = spool_dir(settings)
    if not directory.is_dir():
        return 0
    return sum(len(path.read_text().splitlines()) for path in directory.glob("*.jsonl"))


async def drain(database: Database, settings: Settings) -> int:
    """Write every spooled audit row to the primary; returns how many were written."""
    directory = spool_dir(settings)
    if not directory.is_dir():
        return 0
    written = 0
    for path in sorted(directory.glob("*.jsonl")):
        with path.open("r+", encoding="utf-8") as file:
            fcntl.flock(file, fcntl.LOCK_EX)
            waiting = [json.loads(line) for line in file.read().splitlines() if line]
            while waiting:
                tenant_id = waiting[0]["tenant_id"]
                group = [entry for entry in waiting if entry["tenant_id"] == tenant_id]
                async with database.tenant(tenant_id) as tx:
                    for entry in group:
                        await append(
                            tx,
                            entry["key_id"],
                            entry["action"],
                            entry["target"],
                            entry["detail"],
                            datetime.fromisoformat(entry["at"]),
                        )
                waiting = [entry for entry in waiting if entry["tenant_id"] != tenant_id]
                _rewrite(file, waiting)
                written += len(group)
    # Emptied files stay: their process may be about to append to the file it has open.
    return written


def _rewrite(file: Any, entries: list[dict[str, Any]]) -> None:
    file.seek(0)
    file.truncate()
    file.write("".join(json.dumps(entry) + "\n" for entry in entries))
    file.flush()
    os.fsync(file.fileno())


async def drain_forever(database: Database, settings: Settings) -> None:
    """The service's background task: drain the spool every DRAIN_INTERVAL_S."""
    while True:
        await asyncio.sleep(DRAIN_INTERVAL_S)
        try:
            if written := await drain(database, settings):
                log.info("wrote %d spooled audit rows", written)
        except PRIMARY_UNAVAILABLE as exc:
            log.warning("spooled audit rows wait, the primary still does not take them: %r", exc)


async def entries(
    database: Database, tenant_id: str, since: datetime, limit: int, cursor: str | None = None
) -> dict[str, Any]:
    """A page of the tenant's audit records since a time, oldest first: `entries`, and `next`,
    the cursor of the page after (None on the last)."""
    (after_audit_id,) = cursors.decode(cursor, int) if cursor is not None else (0,)
    async with database.tenant(tenant_id) as tx:
        rows = await tx.fetch("audit_list", since=since, after_audit_id=after_audit_id, limit=limit)
    found = [dict(row) for row in rows]
    more = len(found) == limit
    return {"entries": found, "next": cursors.encode(found[-1]["audit_id"]) if more else None}
