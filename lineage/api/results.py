"""Walk results as one JSON document or, when asked (`Accept: application/x-ndjson`), as a
stream of one record per line and a closing summary line, with bounded server memory."""

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from lineage import walks
from lineage.errors import BadParameter, LineageError
from lineage.settings import Settings

NDJSON = "application/x-ndjson"


def wants_stream(request: Request) -> bool:
    return NDJSON in request.headers.get("accept", "")


async def impact_response(
    request: Request, pool: asyncpg.Pool, settings: Settings, name: str, **values: Any
) -> Response:
    if wants_stream(request):
        return StreamingResponse(_ndjson(pool, settings, name, values), media_type=NDJSON)
    summary = walks.ImpactSummary()
    nodes: list[dict[str, Any]] = []
    async for node in walks.stream(pool, settings, name, **values):
        if len(nodes) == settings.stream_threshold:
            raise BadParameter(
                f"more than {settings.stream_threshold} records; ask for them as a stream "
                f"(Accept: {NDJSON}) or narrow with kind"
            )
        summary.add(node)
        nodes.append(node)
    return JSONResponse({"nodes": nodes, "summary": summary.as_dict()})


async def _ndjson(
    pool: asyncpg.Pool, settings: Settings, name: str, values: dict[str, Any]
) -> AsyncIterator[bytes]:
    summary = walks.ImpactSummary()
    try:
        async for node in walks.stream(pool, settings, name, **values):
            summary.add(node)
            yield json.dumps(node).encode() + b"\n"
    except LineageError as exc:
        # The status line is long gone; the last line says the stream is incomplete.
        yield json.dumps({"error": str(exc), "summary": summary.as_dict()}).encode() + b"\n"
        return
    yield json.dumps({"summary": summary.as_dict()}).encode() + b"\n"
