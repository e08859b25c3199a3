"""The background round merges each tenant's small invalidation postings rows (migration 0049).

An append writes a postings row per key, kind, depth and month, so a key that gains a record in
every append (a popular document, the current chunker) gains a row of a few ids each time, and
its invalidation read visits a row per few ids. Each round (lineage.verifiable_log.storage.
run_once) asks which tenants have records past their 'postings_merged' counter and, for each,
merges the small rows (fewer than 100 ids) of the keys those records are posted under
(lineage_postings_merge), RECORDS_A_CALL records a transaction: the same ids under the same keys,
in rows of 1,000.

A tenant far behind (an installation upgraded to 0049, whose history is merged from its first
record) catches up over rounds, CALLS_A_ROUND calls at a time, so no tenant holds up the others.
Two service processes never merge one tenant at once: the function gives way to the other.
"""

import logging
from dataclasses import dataclass

import asyncpg

from lineage import db
from lineage.core import metrics
from lineage.db.database import Database

log = logging.getLogger(__name__)

RECORDS_A_CALL = 20_000
CALLS_A_ROUND = 10


@dataclass(frozen=True)
class Merged:
    records: int  # records passed
    rows_merged: int  # small rows deleted
    rows_written: int  # rows written in their place


async def merge_tenant(
    connection: asyncpg.Connection, tenant_id: str, calls: int = CALLS_A_ROUND
) -> Merged:
    """Up to `calls` merges of the tenant's next RECORDS_A_CALL records, each its own
    transaction; stops once the tenant is caught up or another process is merging it."""
    records = merged = written = 0
    for _ in range(calls):
        [row] = await db.fetch(
            connection, "postings_merge", tenant_id=tenant_id, records=RECORDS_A_CALL
        )
        records += row["records"]
        merged += row["rows_merged"]
        written += row["rows_written"]
        if row["records"] < RECORDS_A_CALL:
            break
    return Merged(records, merged, written)


async def merge_pending(database: Database) -> dict[str, Merged]:
    """One round's merges: each tenant with records past its counter, by what was merged."""
    done = {}
    async with database.connection() as connection:
        for row in await db.fetch(connection, "postings_pending_tenants"):
            tenant_id = row["tenant_id"]
            done[tenant_id] = merged = await merge_tenant(connection, tenant_id)
            metrics.count_postings_merged(merged.rows_merged, merged.rows_written)
            if merged.rows_merged:
                log.info(
                    "postings of tenant %s: %d small rows merged into %d (%d records passed)",
                    tenant_id, merged.rows_merged, merged.rows_written, merged.records,
                )  # fmt: skip
    return done


async def merge_pending_safely(database: Database) -> None:
    """merge_pending for the background round: a failure is logged and retried next round."""
    try:
        await merge_pending(database)
    except (asyncpg.PostgresError, OSError):
        log.exception("postings: merging small postings rows failed")
