"""A command that waits for a lock says what it waits for: each command names its connections
(application_name "lineage COMMAND [PID]"), and while it runs a watcher on a connection of its
own asks the server every few seconds which of them wait for a lock, on what, and who holds
it (sql/lock_waits.sql), and says so on stderr. A `lineage retention set` that sat 173 s
behind another transaction's lock printed nothing; now it names the lock and its holder."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from lineage.cli.progress import duration
from lineage.db.named_sql import QUERIES

log = logging.getLogger(__name__)

FIRST_LOOK_S = 1.0  # a command that ends sooner never opens the watcher's connection


def application_name(command: str) -> str:
    return f"lineage {command} [{os.getpid()}]"[:63]  # PostgreSQL keeps 63 bytes


def named(url: str, name: str) -> str:
    """The URL with application_name set (unless it sets one), so that its sessions can be
    found in pg_stat_activity."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "application_name" for key, _ in query):
        return url
    return urlunsplit(parts._replace(query=urlencode([*query, ("application_name", name)])))


def wait_line(row: asyncpg.Record, waited_s: float) -> str:
    """One line for a backend of this command that waits, and one holder of the lock."""
    holder = f"pid {row['holder_pid']}"
    about = [row["holder_application"] or None, row["holder_state"]]
    if row["holder_for_s"] is not None:
        about.append(f"in its transaction for {duration(row['holder_for_s'])}")
    described = ", ".join(part for part in about if part)
    if described:
        holder += f" ({described})"
    if row["holder_query"]:
        holder += f": {row['holder_query']}"
    return (
        f"lineage: waiting {duration(waited_s)} for a lock: {row['mode']} on {row['target']}, "
        f"held by {holder}"
    )


async def watch_lock_waits(url: str, name: str, say: Callable[[str], None], every_s: float) -> None:
    """Until cancelled: every `every_s` seconds (the first look after FIRST_LOOK_S), say which
    of the sessions named `name` wait for a lock, and on whom. Quiet if it cannot look: the
    command itself matters, not its watcher."""
    await asyncio.sleep(FIRST_LOOK_S)
    query = QUERIES["lock_waits"]
    try:
        connection = await asyncpg.connect(named(url, f"{name} watcher"))
    except (OSError, asyncpg.PostgresError) as exc:
        log.debug("cannot watch for lock waits: %s", exc)
        return
    loop = asyncio.get_running_loop()
    first_seen: dict[int, float] = {}
    try:
        while True:
            rows = await connection.fetch(query.sql, *query.arguments({"application_name": name}))
            now = loop.time()
            for row in rows:
                seen = first_seen.setdefault(row["pid"], now - FIRST_LOOK_S)
                waited = row["waited_s"] if row["waited_s"] is not None else now - seen
                say(wait_line(row, waited))
            await asyncio.sleep(max(every_s, 0.5))
    except (OSError, asyncpg.PostgresError) as exc:
        log.debug("stopped watching for lock waits: %s", exc)
    finally:
        await connection.close()
