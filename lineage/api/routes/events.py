"""The live event stream: every record of the caller's tenant as it commits (Server-Sent Events).

The `events` table is the truth: a trigger on provenance adds one row per appended record and
NOTIFYs `lineage_events` with the tenant at commit. A stream reads the table after its position
(sql/events_after.sql), so a missed notification only delays it: it also looks every
`events_poll_s`. Positions are (xid, event_id), sent as each event's `id`, so a client that
reconnects with `Last-Event-ID` gets every record after the last one it saw, including those of
a transaction that started earlier and committed later.
"""

import asyncio
import json
import logging
import re
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from lineage import db
from lineage.api.deps import AppSettings, Pool, Read
from lineage.core import metrics
from lineage.core.errors import BadParameter
from lineage.services import walks

router = APIRouter(prefix="/v1/events", tags=["events"])
log = logging.getLogger(__name__)

CHANNEL = "lineage_events"
PAGE_SIZE = 500
KEEPALIVE_S = 15.0
POSITION = re.compile(r"^(?P<xid>\d{1,20})-(?P<event_id>\d{1,19})$")


@dataclass(frozen=True, order=True)
class Position:
    """A place in the stream: the transaction and event of the last record sent."""

    xid: int
    event_id: int

    def token(self) -> str:
        return f"{self.xid}-{self.event_id}"


def parse_position(text: str) -> Position:
    text = text.strip()
    if text == "0":
        return Position(0, 0)
    match = POSITION.match(text)
    if match is None:
        raise BadParameter(
            f"Last-Event-ID {text!r} is not an id this stream sent: send the `id` of the last "
            "event you received, or 0 for every record from the first"
        )
    return Position(int(match["xid"]), int(match["event_id"]))


class EventListener:
    """One dedicated connection LISTENing for the whole app; a notification wakes the streams of
    the tenant it names. If the connection fails, streams go on by polling and the next one to
    wait tries to listen again."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._connection: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()
        self._waiting: defaultdict[str, set[asyncio.Event]] = defaultdict(set)

    def _notified(self, connection: object, pid: int, channel: str, tenant_id: str) -> None:
        for wake in self._waiting.get(tenant_id, ()):
            wake.set()

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
    async def subscribe(self, tenant_id: str) -> AsyncIterator[asyncio.Event]:
        """An event set whenever the tenant may have new records."""
        wake = asyncio.Event()
        self._waiting[tenant_id].add(wake)
        try:
            yield wake
        finally:
            self._waiting[tenant_id].discard(wake)
            if not self._waiting[tenant_id]:
                del self._waiting[tenant_id]

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()


async def read_after(
    pool: asyncpg.Pool, tenant_id: str, after: Position, trace_id: str, session_id: str
) -> tuple[list[asyncpg.Record], Position]:
    """Records after `after` (at most PAGE_SIZE), and where the next page starts."""
    async with db.transaction(pool, tenant_id) as connection:
        rows = await db.fetch(
            connection,
            "events_after",
            tenant_id=tenant_id,
            after_xid=after.xid,
            after_event_id=after.event_id,
            trace_id=trace_id,
            session_id=session_id,
            page_size=PAGE_SIZE,
        )
    records = [row for row in rows if row["event_id"] is not None]
    if len(records) == PAGE_SIZE:
        return records, Position(records[-1]["xid"], records[-1]["event_id"])
    # A short page saw every row below the horizon, the matching and the filtered-out alike.
    return records, max(after, Position(rows[0]["horizon"], 0))


def _message(row: asyncpg.Record) -> str:
    record: dict[str, Any] = walks.node_from_row(row)
    position = Position(record.pop("xid"), record.pop("event_id"))
    del record["horizon"]
    return f"id: {position.token()}\ndata: {json.dumps(record)}\n\n"


async def _stream(
    pool: asyncpg.Pool,
    listener: EventListener,
    poll_s: float,
    tenant_id: str,
    start: Position,
    trace_id: str,
    session_id: str,
) -> AsyncIterator[str]:
    metrics.EVENT_STREAMS.inc()
    try:
        async with listener.subscribe(tenant_id) as wake:
            position, last_sent = start, time.monotonic()
            yield f": stream open after {start.token()}\n\n"
            while True:
                wake.clear()  # before reading: a NOTIFY during the read wakes the next wait
                records, position = await read_after(
                    pool, tenant_id, position, trace_id, session_id
                )
                for row in records:
                    yield _message(row)
                if records:
                    last_sent = time.monotonic()
                if len(records) == PAGE_SIZE:
                    continue
                await listener.listen()
                try:
                    await asyncio.wait_for(wake.wait(), poll_s)
                except TimeoutError:
                    if time.monotonic() - last_sent >= KEEPALIVE_S:
                        yield ": keep-alive\n\n"
                        last_sent = time.monotonic()
    finally:
        metrics.EVENT_STREAMS.dec()


@router.get("", response_class=StreamingResponse)
async def stream_events(
    request: Request,
    pool: Pool,
    caller: Read,
    settings: AppSettings,
    trace_id: Annotated[str, Query(description="only this trace's records")] = "any",
    session_id: Annotated[
        str, Query(description="only records whose attributes.session_id is this")
    ] = "any",
    after: Annotated[
        str | None,
        Query(description="a position to start after, for clients that cannot send headers"),
    ] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """Every new record of your tenant as it is committed, as Server-Sent Events: `id` is the
    stream position, `data` the record. Reconnect with `Last-Event-ID` (or `?after=`) to miss
    nothing; `0` replays from the first record. Without either, the stream starts now."""
    given = last_event_id or after
    if given is not None:
        start = parse_position(given)
    else:
        async with db.transaction(pool, caller.tenant_id) as connection:
            [row] = await db.fetch(connection, "event_horizon")
        start = Position(row["xid"], 0)
    listener: EventListener = request.app.state.events
    await listener.listen()
    return StreamingResponse(
        _stream(
            pool, listener, settings.events_poll_s, caller.tenant_id, start, trace_id, session_id
        ),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
