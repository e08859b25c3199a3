"""Retention by time: `lineage retention set/show/apply` and the service's schedule.

provenance and the tables that follow its rows are partitioned by created_at (migration 0016):
one open partition while no period is set, month partitions while one is (migration 0018).
Expiring a month drops its partitions: a catalog change, as quick for a billion rows as for ten,
with no DELETE and no bloat. lineage_retention_apply, the owner's
definer function, does it, keeping forget tombstones (forget_tombstones) and purging captured
text first; the verifiable log's tables are never partitioned, so every leaf hash and signed
checkpoint stays and proofs still verify. The period is the owner's alone to set.
"""

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import asyncpg

from lineage import db
from lineage.core import tasks
from lineage.core.errors import BadParameter, Forbidden
from lineage.db.database import Database
from lineage.db.errors import OUTAGE_ERRORS

log = logging.getLogger(__name__)

# How often the service applies the policy and adds the months ahead.
SCHEDULE_S = 3600.0


async def apply(database: Database, now: datetime | None = None) -> dict[str, Any]:
    """Expire every month the policy says is past; the receipt written to operator_audit."""
    moment = now or datetime.now(UTC)
    async with database.connection() as connection, connection.transaction():
        [row] = await db.fetch(connection, "retention_apply", now=moment)
    receipt: dict[str, Any] = row["receipt"]
    return receipt


async def get_policy(database: Database) -> dict[str, Any]:
    async with database.connection() as connection:
        [row] = await db.fetch(connection, "retention_policy_get")
    return dict(row)


async def set_policy(
    database: Database, keep_months: int, now: datetime | None = None
) -> int | None:
    """Keep records at least `keep_months` months (0: keep everything); the owner's alone.

    The partitions follow in the same transaction: a period closes the open partition at the
    start of next month (what it holds expires whole, once that month is past the period).
    Its rows are read against that bound beforehand, each step committed on its own, so that
    appends never wait for the read: a check NOT VALID, then its validation, which the close
    trusts. Interrupted, the next `set` drops the check left (else next month's appends fail)."""
    if not 0 <= keep_months <= 1200:
        raise BadParameter("keep_months must be between 0 (keep everything) and 1200")
    moment = now or datetime.now(UTC)
    async with database.connection() as connection:
        if await connection.fetchval("SELECT current_user") == db.APP_ROLE:
            raise Forbidden(f"the retention period is the database owner's, not {db.APP_ROLE}'s")
        await db.fetch(connection, "open_partitions_check", now=moment, add=keep_months > 0)
        try:
            if keep_months:
                await db.fetch(connection, "open_partitions_validate")
            async with connection.transaction():
                [row] = await db.fetch(connection, "retention_policy_set", keep_months=keep_months)
                await db.fetch(connection, "partitions_shape", now=moment)
        except asyncpg.PostgresError:
            await db.fetch(connection, "open_partitions_check", now=moment, add=False)
            raise
    kept: int | None = row["keep_months"]
    return kept


@asynccontextmanager
async def scheduled(database: Database, every_s: float = SCHEDULE_S) -> AsyncIterator[None]:
    """Apply the policy now and every `every_s` seconds while the block runs; a failure is
    logged and retried next round (appends never wait on it)."""

    async def loop() -> None:
        while True:
            try:
                receipt = await apply(database)
                if receipt["months_dropped"]:
                    log.info("retention: expired %s", receipt["months_dropped"])
            except (asyncpg.PostgresError, *OUTAGE_ERRORS):
                if tasks.cancelled():
                    raise
                log.exception("retention: apply failed; retrying in %.0f s", every_s)
            await asyncio.sleep(every_s)

    task = asyncio.create_task(loop(), name="retention")
    try:
        yield
    finally:
        await tasks.stop(task)
