"""Month partitions for the records a batch holds.

provenance (and the tables that follow its rows) is partitioned by created_at: one open
partition while no retention period is set, a partition per month while one is (migrations
0016, 0018); a record whose month has no partition cannot be stored. The service's retention
schedule adds the months ahead, and this is the fallback for everything that appends without it
(the CLI, an SDK store, an import of old records): the first append of a month in a process
adds what is missing through the owner's definer function (nothing while the open partition
covers every month), once per database.
"""

from collections.abc import Iterable
from datetime import UTC, datetime

import asyncpg

from lineage import db

# (server address, database, year, month) whose partitions are known to exist.
_months_ready: set[tuple[object, object, int, int]] = set()


def _month(moment: datetime) -> tuple[int, int]:
    moment = moment.astimezone(UTC)
    return moment.year, moment.month


async def ensure_partitions(
    connection: asyncpg.Connection, created_ats: Iterable[datetime]
) -> None:
    """Make sure every month of `created_ats` has its partitions, in the caller's transaction."""
    # A pooled connection passes these on to the connection it wraps.
    where = (getattr(connection, "_addr", None), getattr(connection, "_params", None))
    database = (where[0], getattr(where[1], "database", None))
    wanted = {(*database, *_month(moment)): moment for moment in created_ats}
    missing = [key for key in wanted if key not in _months_ready]
    if not missing:
        return
    moments = [wanted[key] for key in missing]
    await db.fetch(connection, "partitions_add", from_time=min(moments), through=max(moments))
    _months_ready.update(missing)
