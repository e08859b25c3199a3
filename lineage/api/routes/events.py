"""The live event stream: every record of the caller's tenant as it commits (Server-Sent Events).

The `events` table is the truth (lineage/services/events.py): each appended record has its
tenant's next position, sent as the event's `id`, so a client that reconnects with
`Last-Event-ID` gets every record after the last one it saw. A stream reads the table after its
position (sql/events_after.sql) when a notification says its tenant has new records, and every
`events_poll_s` in case one was missed. With a read replica the stream reads the replica and
listens on the primary; a notification names the position it announces, and the stream reads
again shortly until the replica has replayed that far.
"""

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from lineage.api import models
from lineage.api.deps import EVENT_STREAM_SLOT, AppSettings, Read, ReadDb
from lineage.api.results import Stream
from lineage.core import metrics
from lineage.db.database import Database
from lineage.services import reads
from lineage.services.events import EventListener, follow, newest_position, parse_position

router = APIRouter(prefix="/v1/events", tags=["events"])


def _message(row: asyncpg.Record) -> str:
    record: dict[str, Any] = reads.node_from_row(row)
    position = record.pop("position")
    del record["newest"]
    return f"id: {position}\ndata: {json.dumps(record)}\n\n"


async def _sse(
    database: Database,
    listener: EventListener,
    poll_s: float,
    tenant_id: str,
    start: int,
    trace_id: str,
    session_id: str,
) -> AsyncGenerator[str, None]:
    metrics.EVENT_STREAMS.inc()
    opened = False
    rows = follow(database, listener, poll_s, tenant_id, start, trace_id, session_id)
    try:
        async with aclosing(rows):  # the caller gone, the subscription ends with the stream
            async for row in rows:
                if row is not None:
                    yield _message(row)
                elif opened:
                    yield ": keep-alive\n\n"
                else:
                    yield f": stream open after {start}\n\n"
                    opened = True
    finally:
        metrics.EVENT_STREAMS.dec()


@router.get(
    "",
    response_class=StreamingResponse,
    responses=models.EVENT_STREAM,
    dependencies=[EVENT_STREAM_SLOT],
)
async def stream_events(
    request: Request,
    database: ReadDb,
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
        start = await newest_position(database, caller.tenant_id)
    listener: EventListener = request.app.state.events
    await listener.listen()
    return Stream(
        _sse(
            database,
            listener,
            settings.events_poll_s,
            caller.tenant_id,
            start,
            trace_id,
            session_id,
        ),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
