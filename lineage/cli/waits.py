"""A command that waits for a lock says what it waits for: each command names its connections
(application_name "lineage COMMAND [PID]"), and while it runs a watcher on a connection of its
own asks the server every few seconds which of them wait for a lock, on what, and who holds
it (sql/lock_waits.sql), and says so on stderr. A `lineage retention set` that sat 173 s
behind another transaction's lock printed nothing; now it names the lock and its holder."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from lineage.cli.progress import duration
from lineage.services import lock_waits

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


def wait_line(row: Mapping[str, Any], waited_s: float) -> str:
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
    """Until cancelled: say which of the sessions named `name` wait for a lock, and on whom
    (lineage.services.lock_waits looks; the first look comes after FIRST_LOOK_S)."""
    await lock_waits.watch(
        named(url, f"{name} watcher"),
        name,
        lambda row, waited_s: say(wait_line(row, waited_s)),
        first_look_s=FIRST_LOOK_S,
        every_s=every_s,
    )
