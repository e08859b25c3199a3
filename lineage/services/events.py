"""The live event stream's storage: every appended record gets its tenant's next position.

The append (the owner's lineage_append) numbers its new records last in its call, holding the
tenant's counter row until commit, so a tenant's positions are dense, commit in
their order, and depend on no server's transaction ids: a reader after position p gets every
record numbered above p that is visible to it, and none can become visible later below it.
It also NOTIFYs `lineage_events` on the server it writes to (the primary; on Citus the
coordinator), which wakes the streams (`follow`); they also poll, so a
lost notification, a direct writer or a replica that replays later only delays them.
"""

import asyncio
import hashlib
import logging
import re
import time
from collections import defaultdict
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from lineage import db
from lineage.core import metrics
from lineage.core.errors import BadParameter
from lineage.db.database import Database, Transaction

log = logging.getLogger(__name__)

CHANNEL = "lineage_events"
PAGE_SIZE = 500
KEEPALIVE_S = 15.0
# How soon a stream reads again when a notification announced a position its server (a replica
# behind the primary) does not show yet; it doubles up to the poll interval.
REPLAY_RETRY_S = 0.01
BIGINT_MAX = 2**63 - 1
POSITION = re.compile(r"^\d{1,19}$")
# What streams sent before positions were counted per tenant.
OLD_POSITION = re.compile(r"^\d{1,20}-\d{1,19}$")


def parse_position(text: str) -> int:
    """A stream position sent back by a client (`Last-Event-ID` or `?after=`)."""
    text = text.strip()
    if OLD_POSITION.fullmatch(text):
        raise BadParameter(
            f"Last-Event-ID {text!r} is a position from before positions were counted per "
            "tenant: send 0 to replay every record, or reconnect without it for new ones"
        )
    if POSITION.fullmatch(text) is None or int(text) > BIGINT_MAX:
        raise BadParameter(
            f"Last-Event-ID {text!r} is not an id this stream sent: send the `id` of the last "
            "event you received, or 0 for every record from the first"
        )
    return int(text)


def stream_tag(tenant_id: str, token: str | None) -> str:
    """What a notification names its tenant by: a hash of the tenant's token, which no other
    tenant's session can make. Any role may LISTEN on the channel; it reads no tenant's name."""
    return hashlib.sha256(f"{CHANNEL}/{token or tenant_id}".encode()).hexdigest()[:32]


async def notify_appended(tx: Transaction, last_position: int) -> None:
    """Wake the tenant's streams at commit: lineage_append numbered its new records up to
    `last_position`."""
    tag = stream_tag(tx.tenant_id, tx.token)
    await db.execute(tx.connection, "events_notify", payload=f"{last_position}:{tag}")


async def tenant_stream_tag(database: Database, tenant_id: str) -> str:
    """The tag the tenant's notifications carry (stream_tag), from the pool's vouching key."""
    async with database.connection() as connection:
        key = getattr(connection, "vouching_key", None)
    return stream_tag(tenant_id, None if key is None else db.tenant_token(key, tenant_id))


async def newest_position(database: Database, tenant_id: str) -> int:
    async with database.tenant(tenant_id) as tx:
        [row] = await tx.fetch("event_horizon")
    position: int = row["position"]
    return position


async def read_after(
    database: Database, tenant_id: str, after: int, trace_id: str, session_id: str
) -> tuple[list[asyncpg.Record], int]:
    """Records after `after` (at most PAGE_SIZE), and where the next page starts."""
    async with database.tenant(tenant_id) as tx:
        rows = await tx.fetch(
            "events_after",
            after=after,
            trace_id=trace_id,
            session_id=session_id,
            page_size=PAGE_SIZE,
        )
    records = [row for row in rows if row["position"] is not None]
    if len(records) == PAGE_SIZE:
        return records, int(records[-1]["position"])
    # A short page saw every row up to the newest, the matching and the filtered-out alike.
    return records, max(after, int(rows[0]["newest"]))


class EventListener:
    """One dedicated connection LISTENing for the whole app, on the server appends write to (a
    hot standby cannot LISTEN); a notification wakes the streams of the tenant it names (by its
    stream_tag) and tells them the position to wait for. If the connection fails, streams go
    on by polling and the next one to wait tries to listen again."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._connection: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()
        self._waiting: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self._notified_position: dict[str, int] = {}

    def _notified(self, connection: object, pid: int, channel: str, payload: str) -> None:
        position, _, tag = payload.partition(":")
        if tag not in self._waiting:
            return
        self._notified_position[tag] = max(int(position), self._notified_position.get(tag, 0))
        for wake in self._waiting[tag]:
            wake.set()

    def subscriptions(self, tag: str) -> int:
        """How many streams of the tenant (by its stream_tag) wait on its notifications."""
        return len(self._waiting.get(tag, ()))

    def notified_position(self, tag: str) -> int:
        """The highest position a notification announced for the tenant while it had streams."""
        return self._notified_position.get(tag, 0)

    async def listen(self) -> None:
        """Make sure the LISTEN connection is up (a no-op when it is)."""
        async with self._lock:
            if self._connection is not None and not self._connection.is_closed():
                return
            try:
                connection = await asyncpg.connect(self.url)
                await connection.add_listener(CHANNEL, self._notified)
            except (OSError, asyncpg.PostgresError) as exc:
                log.warning("event stream cannot LISTEN (streams poll instead): %r", exc)
                metrics.count_degraded("event_listener_failed")
                return
            self._connection = connection

    @asynccontextmanager
    async def subscribe(self, tag: str) -> AsyncIterator[asyncio.Event]:
        """An event set whenever the tenant (by its stream_tag) may have new records."""
        wake = asyncio.Event()
        self._waiting[tag].add(wake)
        try:
            yield wake
        finally:
            self._waiting[tag].discard(wake)
            if not self._waiting[tag]:
                del self._waiting[tag]
                self._notified_position.pop(tag, None)

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()


async def follow(
    database: Database,
    listener: EventListener,
    poll_s: float,
    tenant_id: str,
    start: int,
    trace_id: str,
    session_id: str,
) -> AsyncGenerator[asyncpg.Record | None, None]:
    """Every record of the tenant after position `start`, in order, as it commits; forever.

    None when there is nothing to send: first once subscribed (a record committed from then on
    is sent), then after KEEPALIVE_S without a record. It reads after a notification says the
    tenant has new records, and every `poll_s`; with a read replica it reads the replica and
    listens on the primary, reading again shortly until the replica shows the position a
    notification announced.
    """
    tag = await tenant_stream_tag(database, tenant_id)
    async with listener.subscribe(tag) as wake:
        position, last_sent, retry_s = start, time.monotonic(), REPLAY_RETRY_S
        yield None
        while True:
            wake.clear()  # before reading: a NOTIFY during the read wakes the next wait
            records, position = await read_after(
                database, tenant_id, position, trace_id, session_id
            )
            for row in records:
                yield row
            if records:
                last_sent = time.monotonic()
            if len(records) == PAGE_SIZE:
                continue
            if position < listener.notified_position(tag):
                wait_s, retry_s = retry_s, min(retry_s * 2, poll_s)
            else:
                wait_s, retry_s = poll_s, REPLAY_RETRY_S
            await listener.listen()
            try:
                await asyncio.wait_for(wake.wait(), wait_s)
            except TimeoutError:
                if time.monotonic() - last_sent >= KEEPALIVE_S:
                    yield None
                    last_sent = time.monotonic()
