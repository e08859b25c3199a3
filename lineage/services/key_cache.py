"""API keys as the database last answered for them, kept in the server process and dropped the
moment a key is revoked, so a request need not look its key up.

Revoking a key (lineage_key_revoke) and deleting a tenant (lineage_delete_tenant) NOTIFY
`lineage_keys` in their transaction, however they are called; one connection per process
LISTENs and empties the cache on each notification. A cached key is trusted only after a round
trip on that connection that began after the request arrived: the revoking backend signals the
listener before its COMMIT returns, so a revocation committed before the request reaches the
listener ahead of that round trip's reply and has emptied the cache by the time the request
reads it (asyncpg runs the notification's callback before it resumes the request). No timing is
assumed. While the connection is down nothing is trusted: every request looks its key up, as
without a cache.
"""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import asyncpg

from lineage.core import metrics, tasks
from lineage.db.errors import PRIMARY_TIMEOUT_S

log = logging.getLogger(__name__)

CHANNEL = "lineage_keys"
RECONNECT_S = 5.0


class KeyCache:
    """Key rows by key id, valid while `CHANNEL` is listened to on the primary at `url`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._rows: dict[str, asyncpg.Record] = {}
        # Moves on every notification and every (re)connection: a lookup that began before a
        # move may hold a row read before the revocation, so it is not kept.
        self._generation = 0
        self._connection: asyncpg.Connection | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._retry_at = 0.0
        self._sent: asyncio.Task[None] | None = None  # the round trip on its way
        self._next: asyncio.Task[None] | None = None  # the one that starts after it

    async def row(
        self, key_id: str, lookup: Callable[[], Awaitable[asyncpg.Record | None]]
    ) -> asyncpg.Record | None:
        """The key's row as of now (every revocation committed before this call counted):
        from the cache when the listener confirms it, else from `lookup`."""
        if not await self._caught_up():
            return await lookup()
        if (cached := self._rows.get(key_id)) is not None:
            return cached
        generation = self._generation
        found = await lookup()
        if found is not None and generation == self._generation:
            self._rows[key_id] = found
        return found

    async def _caught_up(self) -> bool:
        """Whether every notification committed before this call has been handled."""
        connection = self._listening()
        if connection is None:
            return False
        # A round trip sent before this call may have overtaken the notification: wait for one
        # sent after it, shared by every request that arrives before it is sent.
        if self._next is None:
            self._next = asyncio.ensure_future(self._round_trip(connection, self._sent))
        try:
            await asyncio.shield(self._next)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
            return False
        return True

    async def _round_trip(
        self, connection: asyncpg.Connection, previous: asyncio.Task[None] | None
    ) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        self._sent, self._next = self._next, None
        try:
            await connection.execute("SELECT 1", timeout=PRIMARY_TIMEOUT_S)
        except BaseException:
            self._lost(connection)
            raise

    async def listen(self) -> None:
        """Start listening (at start-up; after a failure, requests reconnect it)."""
        if self._listening() is None and self._connecting is not None:
            await asyncio.shield(self._connecting)

    def _listening(self) -> asyncpg.Connection | None:
        """The LISTEN connection when it is up; else None, and a reconnection under way."""
        if self._connection is not None and not self._connection.is_closed():
            return self._connection
        now = time.monotonic()
        if self._connecting is None and now >= self._retry_at:
            self._retry_at = now + RECONNECT_S
            self._connecting = asyncio.create_task(self._connect(), name="key-cache-listen")
        return None

    async def _connect(self) -> None:
        try:
            connection = await asyncpg.connect(
                self.url, timeout=PRIMARY_TIMEOUT_S, server_settings={"application_name": CHANNEL}
            )
            await connection.add_listener(CHANNEL, self._revoked)
            connection.add_termination_listener(self._lost)
        except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
            log.warning("key cache cannot LISTEN (every request looks its key up): %r", exc)
            metrics.count_degraded("key_cache_listener_failed")
            return
        finally:
            self._connecting = None
        self._forget()  # what was cached before the LISTEN may have missed a revocation
        self._connection = connection

    def _revoked(self, connection: object, pid: int, channel: str, payload: str) -> None:
        self._forget()

    def _lost(self, connection: asyncpg.Connection) -> None:
        listening = self._connection
        if listening is None or connection is not listening:
            return  # a connection already replaced
        self._connection = None
        self._forget()
        if not listening.is_closed():
            listening.terminate()

    def _forget(self) -> None:
        self._rows.clear()
        self._generation += 1

    async def close(self) -> None:
        if self._connecting is not None:
            await tasks.stop(self._connecting)
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await connection.close()
