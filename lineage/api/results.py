"""Walk results as one JSON document or, when asked (`Accept: application/x-ndjson`), as a
stream of one record per line and a closing summary line, with bounded server memory."""

import json
from collections.abc import AsyncIterator
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from lineage.core.errors import BadParameter, LineageError
from lineage.db.database import Database
from lineage.services import reads, walks
from lineage.settings import Settings

NDJSON = "application/x-ndjson"
# A stream goes out in pieces of about this size: one write per line made a 189k-line
# listing spend its time in the server's send path rather than in the walk.
CHUNK_BYTES = 64 * 1024
T = TypeVar("T")


async def chunked(lines: AsyncIterator[str]) -> AsyncIterator[bytes]:
    """The lines joined into pieces of about CHUNK_BYTES, so memory stays bounded."""
    pending: list[str] = []
    size = 0
    async for line in lines:
        pending.append(line)
        size += len(line)
        if size >= CHUNK_BYTES:
            yield "".join(pending).encode()
            pending, size = [], 0
    if pending:
        yield "".join(pending).encode()


def wants_stream(request: Request) -> bool:
    return NDJSON in request.headers.get("accept", "")


async def impact_response(
    request: Request, database: Database, settings: Settings, name: str, **values: Any
) -> Response:
    if wants_stream(request):
        streamed = await started(reads.stream(database, settings, name, **values))
        return StreamingResponse(chunked(_ndjson(streamed)), media_type=NDJSON)
    summary = walks.ImpactSummary()
    nodes: list[dict[str, Any]] = []
    async for node in reads.stream(database, settings, name, **values):
        if len(nodes) == settings.stream_threshold:
            raise BadParameter(
                f"more than {settings.stream_threshold} records; ask for them as a stream "
                f"(Accept: {NDJSON}) or narrow with kind"
            )
        summary.add(node)
        nodes.append(node)
    return JSONResponse({"nodes": nodes, "summary": summary.as_dict()})


async def started(nodes: AsyncIterator[T]) -> AsyncIterator[T]:
    """The same items with the first one already read, so that a walk failing at its start (bad
    input, the database) fails before the 200 is sent, as an answer the caller can read."""
    try:
        first = await anext(nodes)
    except StopAsyncIteration:
        return _none()

    async def resumed() -> AsyncIterator[T]:
        yield first
        async for node in nodes:
            yield node

    return resumed()


async def _none() -> AsyncIterator[T]:
    return
    yield  # an async generator that yields nothing


async def _ndjson(nodes: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    summary = walks.ImpactSummary()
    try:
        async for node in nodes:
            summary.add(node)
            yield json.dumps(node) + "\n"
    except LineageError as exc:
        # The status line is long gone; the last line says the stream is incomplete.
        yield json.dumps({"error": str(exc), "summary": summary.as_dict()}) + "\n"
        return
    yield json.dumps({"summary": summary.as_dict()}) + "\n"
