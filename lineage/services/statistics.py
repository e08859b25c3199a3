"""Statistics that follow each tenant's growth, refreshed by the service's background round.

PostgreSQL plans a tenant's queries on per-table statistics. Taken before a tenant had records,
beside another tenant they counted, they take the new tenant's rows for one; its walk-back then
read every record of the tenant at each level, a batch append into it ran 82 s instead of 7.7 s
and sequencing its log 251 s instead of 17 s. Autovacuum analyzes a table once a tenth of it has
changed, which a new tenant beside large ones never reaches, and never a partitioned parent.

So each round (lineage.verifiable_log.storage.run_once) asks whether some tenant with at least
ANALYZE_FROM records has grown FACTOR-fold since the service last analyzed (its records appended,
the tenant's events counter; `statistics_analyzed` keeps the counts, shared by every replica and
kept over restarts), and if so analyzes the tables a tenant's reads, appends and log plan on
(lineage_statistics_tables()), one a transaction, as their owner (SECURITY DEFINER functions).
A table whose lock conflicts (retention's partition DDL, a Citus shard move, another ANALYZE) is
skipped at once, never waited for, and the counts are kept only once every table is analyzed,
so the next round tries again. One ANALYZE counts every tenant, so a round analyzes at most once,
and each tenant brings it about at most once per doubling of its records.

On Citus, ANALYZE on the coordinator is propagated to every shard of the distributed table,
where each tenant's query is planned; lineage_analyze sends its lock_timeout to the workers
along with it, so a shard's lock (a shard move's) is not waited for either.

A bundle import analyzes the tables it fills inside its own transaction (lineage.bundle.load),
whose rows no other session sees yet; once it commits, the round finds the tenant grown.
"""

import logging

import asyncpg

from lineage import db
from lineage.db.database import Database

log = logging.getLogger(__name__)

# Below this many records any plan for a tenant is quick.
ANALYZE_FROM = 1000
# How much a tenant grows between the service's ANALYZEs: its estimates stay within this factor.
FACTOR = 2.0


async def follow_growth(database: Database) -> list[str]:
    """Analyze the tenant tables if some tenant has outgrown the statistics; the tables analyzed
    (all of them, or those analyzed before a lock conflict stopped the round)."""
    async with database.connection() as connection:
        [due] = await db.fetch(
            connection, "statistics_due", from_records=ANALYZE_FROM, factor=FACTOR
        )
        analyzed: list[str] = []
        for table in due["tables"]:
            # Outside a transaction: each table's lock is released as its ANALYZE ends.
            [row] = await db.fetch(connection, "statistics_analyze", table_name=table)
            if not row["analyzed"]:
                log.info("statistics: %s is locked; analyzing again next round", table)
                return analyzed
            analyzed.append(table)
        if analyzed:
            await db.execute(connection, "statistics_analyzed")
            log.info("statistics: a tenant grew %g-fold; analyzed %s", FACTOR, ", ".join(analyzed))
    return analyzed


async def follow_growth_safely(database: Database) -> None:
    """follow_growth for the background round: a failure is logged and retried next round."""
    try:
        await follow_growth(database)
    except (asyncpg.PostgresError, OSError):
        log.exception("statistics: refreshing the tenant tables' statistics failed")
