"""OTLP intake throughput: spans a second through `POST /v1/traces` and the cost of one span.

    python -m bench.otlp --server postgresql://postgres@127.0.0.1:5432/postgres

A fresh database gets a corpus of documents and chunks (derive()), then uvicorn serves the app
and a few clients post protobuf ExportTraceServiceRequests as an exporter sends them: each
request one trace of a RAG query's shape (a retrieval span naming `--docs` chunks by id, an LLM
span, and `--plain` ordinary spans). Reported: spans/s end to end, requests/s, CPU of the
server process per span, and the database growth per span (rows of spans plus derived records).
"""

import argparse
import asyncio
import json
import os
import secrets
import time

import asyncpg
import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from bench.database import drop, recreate
from bench.server import serving
from lineage.core.derive import Derivation, derive_many
from lineage.db.database import Database
from lineage.settings import Settings
from lineage.store import PostgresStore


def _attribute(key: str, value: str | float) -> KeyValue:
    pair = KeyValue(key=key)
    if isinstance(value, str):
        pair.value.string_value = value
    else:
        pair.value.double_value = value
    return pair


def export_request(chunks: list[str], docs: int, plain: int) -> bytes:
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    resource.resource.attributes.append(_attribute("service.name", "bench"))
    scope = resource.scope_spans.add()
    trace_id = secrets.token_bytes(16)
    root = secrets.token_bytes(8)
    start = time.time_ns()

    def span(name: str, offset: int, parent: bytes | None) -> object:
        added = scope.spans.add()
        added.trace_id, added.span_id, added.name = trace_id, secrets.token_bytes(8), name
        if parent:
            added.parent_span_id = parent
        added.start_time_unix_nano = start + offset * 1000
        added.end_time_unix_nano = start + offset * 1000 + 500
        return added

    top = span("query", 0, None)
    top.span_id = root  # type: ignore[attr-defined]
    retrieval = span("retrieve", 1, root)
    retrieval.attributes.append(_attribute("openinference.span.kind", "RETRIEVER"))  # type: ignore[attr-defined]
    for n, chunk in enumerate(secrets.SystemRandom().sample(chunks, docs)):
        prefix = f"retrieval.documents.{n}.document."
        retrieval.attributes.append(_attribute(prefix + "id", chunk))  # type: ignore[attr-defined]
        retrieval.attributes.append(_attribute(prefix + "score", 1.0 / (n + 1)))  # type: ignore[attr-defined]
    llm = span("llm", 2, root)
    llm.attributes.append(_attribute("openinference.span.kind", "LLM"))  # type: ignore[attr-defined]
    llm.attributes.append(_attribute("llm.input_messages.0.message.content", "q " * 200))  # type: ignore[attr-defined]
    llm.attributes.append(_attribute("llm.output_messages.0.message.content", "a " * 50))  # type: ignore[attr-defined]
    for n in range(plain):
        span(f"step {n}", 3 + n, root)
    serialized: bytes = request.SerializeToString()
    return serialized


async def corpus(url: str, chunks: int) -> list[str]:
    database = await Database.connect(Settings(), url, max_size=2)
    try:
        store = PostgresStore(database)
        [doc] = await derive_many(
            store, [Derivation([], "corpus", "document", "loader", "1", source_uri="bench://c")]
        )
        made = await derive_many(
            store,
            [Derivation([doc], f"chunk {n}", "chunk", "splitter", "1") for n in range(chunks)],
        )
        return [c.context_id for c in made]
    finally:
        await database.close()


async def sizes(url: str) -> tuple[int, int]:
    connection = await asyncpg.connect(url)
    try:
        size = await connection.fetchval("SELECT pg_database_size(current_database())")
        spans = await connection.fetchval("SELECT count(*) FROM spans")
        return int(size), int(spans)
    finally:
        await connection.close()


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def post_all(base_url: str, bodies: list[bytes], clients: int) -> float:
    queue = list(bodies)
    headers = {"Content-Type": "application/x-protobuf"}

    async def worker() -> None:
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
            while queue:
                response = await client.post("/v1/traces", content=queue.pop(), headers=headers)
                response.raise_for_status()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="a PostgreSQL server URL (superuser)")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--docs", type=int, default=5, help="documents per retrieval span")
    parser.add_argument("--plain", type=int, default=8, help="ordinary spans per request")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--chunks", type=int, default=2000)
    args = parser.parse_args()
    name = "bench_otlp"
    url = await recreate(args.server, name)
    try:
        chunks = await corpus(url, args.chunks)
        bodies = [export_request(chunks, args.docs, args.plain) for _ in range(args.requests)]
        spans_per_request = 3 + args.plain
        size_before, _ = await sizes(url)
        with serving(url, {"LINEAGE_AUTH": "none", "LINEAGE_LOG_INTERVAL_S": "0"}) as server:
            await post_all(server.base_url, bodies[:20], args.clients)  # warm up
            cpu_before = cpu_seconds(server.process.pid)
            elapsed = await post_all(server.base_url, bodies[20:], args.clients)
            cpu = cpu_seconds(server.process.pid) - cpu_before
        size_after, stored = await sizes(url)
        timed_spans = (args.requests - 20) * spans_per_request
        print(
            json.dumps(
                {
                    "requests": args.requests - 20,
                    "spans_per_request": spans_per_request,
                    "documents_per_retrieval": args.docs,
                    "clients": args.clients,
                    "spans_per_s": round(timed_spans / elapsed),
                    "requests_per_s": round((args.requests - 20) / elapsed, 1),
                    "server_cpu_us_per_span": round(cpu / timed_spans * 1e6, 1),
                    "bytes_per_span_on_disk": round((size_after - size_before) / stored),
                    "spans_stored": stored,
                },
                indent=2,
            )
        )
    finally:
        await drop(args.server, name)


if __name__ == "__main__":
    asyncio.run(main())
