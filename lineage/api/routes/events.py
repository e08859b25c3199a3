"""The live event stream: every record of the caller's tenant as it commits (Server-Sent Events).

The `events` table is the truth (lineage/services/events.py): each appended record has its
tenant's next position, sent as the event's `id`, so a client that reconnects with
`Last-Event-ID` gets every record after the last one it saw. A stream reads the table after its
position (sql/events_after.sql) when a notification says its tenant has new records, and every
`events_poll_s` in case one was missed. With a read replica the stream reads the replica and
listens on the primary; a notification names the position it announces, and the stream reads
again shortly until the replica has replayed that far.
"""

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from lineage.api import models
from lineage.api.deps import AppSettings, Read, ReadPool
from lineage.core import metrics
from lineage.services import walks
from lineage.services.events import (
    PAGE_SIZE,
    EventListener,
    newest_position,
    parse_position,
    read_after,
)

router = APIRouter(prefix="/v1/events", tags=["events"])

KEEPALIVE_S = 15.0
# How soon a stream reads again when a notification announced a position its server (a replica
# behind the primary) does not show yet; it doubles up to the poll interval.
REPLAY_RETRY_S = 0.01


def _message(row: asyncpg.Record) -> str:
    record: dict[str, Any] = walks.node_from_row(row)
    position = record.pop("position")
    del record["newest"]
    return f"id: {position}\ndata: {json.dumps(record)}\n\n"


async def _stream(
    pool: asyncpg.Pool,
    listener: EventListener,
    poll_s: float,
    tenant_id: str,
    start: int,
    trace_id: str,
    session_id: str,
) -> AsyncIterator[str]:
    metrics.EVENT_STREAMS.inc()
    try:
        async with listener.subscribe(tenant_id) as wake:
            position, last_sent, retry_s = start, time.monotonic(), REPLAY_RETRY_S
            yield f": stream open after {start}\n\n"
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
                if position < listener.notified_position(tenant_id):
                    wait_s, retry_s = retry_s, min(retry_s * 2, poll_s)
                else:
                    wait_s, retry_s = poll_s, REPLAY_RETRY_S
                await listener.listen()
                try:
                    await asyncio.wait_for(wake.wait(), wait_s)
                except TimeoutError:
                    if time.monotonic() - last_sent >= KEEPALIVE_S:
                        yield ": keep-alive\n\n"
                        last_sent = time.monotonic()
    finally:
        metrics.EVENT_STREAMS.dec()


@router.get("", response_class=StreamingResponse, responses=models.EVENT_STREAM)
async def stream_events(
    request: Request,
    pool: ReadPool,
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
    stream position (your tenant's count of records appended), `data` the record. Reconnect
    with `Last-Event-ID` (or `?after=`) to miss nothing; `0` replays from the first record.
    Without either, the stream starts now."""
    given = last_event_id or after
    if given is not None:
        start = parse_position(given)
    else:
        start = await newest_position(pool, caller.tenant_id)
    listener: EventListener = request.app.state.events
    await listener.listen()
    return StreamingResponse(
        _stream(
            pool, listener, settings.events_poll_s, caller.tenant_id, start, trace_id, session_id
        ),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
