"""Which of a command's sessions wait for a lock, and on whom (sql/lock_waits.sql), looked up
on a connection of its own while the command runs."""

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import asyncpg

from lineage.db.named_sql import QUERIES

log = logging.getLogger(__name__)


async def watch(
    url: str,
    application_name: str,
    report: Callable[[Mapping[str, Any], float], None],
    *,
    first_look_s: float,
    every_s: float,
) -> None:
    """Until cancelled: every `every_s` seconds (the first look after `first_look_s`), report
    each session named `application_name` that waits for a lock, with how long it has waited.
    Quiet if it cannot look: the command itself matters, not its watcher."""
    await asyncio.sleep(first_look_s)
    query = QUERIES["lock_waits"]
    try:
        connection = await asyncpg.connect(url)
    except (OSError, asyncpg.PostgresError) as exc:
        log.debug("cannot watch for lock waits: %s", exc)
        return
    loop = asyncio.get_running_loop()
    first_seen: dict[int, float] = {}
    try:
        while True:
            rows = await connection.fetch(
                query.sql, *query.arguments({"application_name": application_name})
            )
            now = loop.time()
            for row in rows:
                seen = first_seen.setdefault(row["pid"], now - first_look_s)
                waited = row["waited_s"] if row["waited_s"] is not None else now - seen
                report(row, waited)
            await asyncio.sleep(max(every_s, 0.5))
    except (OSError, asyncpg.PostgresError) as exc:
        log.debug("stopped watching for lock waits: %s", exc)
    finally:
        await connection.close()
