"""A bounded load run: single-record appends at a fixed rate against a real uvicorn server on
loopback, then a count of what the database holds.

Open loop: request i is due at start + i / rate whatever happened before it, and its latency
runs from when it was due, so a slow server shows as latency rather than as a lower rate. A
request the server sheds (429) is counted as refused, with how fast the refusal came; the
latency percentiles are those of acknowledged (2xx) appends. Closed loop (no rate): each
connection sends when it has its answer, and waits out Retry-After after a 429 as a client
should.

    python -m bench.load --rate 3000 --seconds 20     # its own fresh database, then dropped
"""

import argparse
import asyncio
import json
import secrets
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import asyncpg

from bench.figures import percentile
from bench.server import Connection, Server, serving

SEED_DOCUMENTS = 200


@dataclass
class LoadResult:
    rate_asked: float
    seconds: float
    sent: int = 0
    acknowledged: int = 0  # 2xx
    statuses: Counter[int] = field(default_factory=Counter)
    transport_errors: int = 0
    latencies_ms: list[float] = field(default_factory=list)  # of acknowledged appends
    refused_ms: list[float] = field(default_factory=list)  # of 429 answers
    stored: int = 0  # acknowledged ids found in the database afterwards
    duplicates: int = 0

    @property
    def throughput(self) -> float:
        return self.acknowledged / self.seconds

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)

    @property
    def refused(self) -> int:
        return self.statuses[429]

    @property
    def lost(self) -> int:
        return self.acknowledged - self.stored

    def percentile(self, fraction: float) -> float:
        return percentile(self.latencies_ms, fraction)

    def summary(self) -> dict[str, object]:
        return {
            "rate_asked_per_s": self.rate_asked if self.rate_asked == self.rate_asked else None,
            "throughput_per_s": round(self.throughput, 1),
            "sent": self.sent,
            "acknowledged": self.acknowledged,
            "statuses": dict(sorted(self.statuses.items())),
            "transport_errors": self.transport_errors,
            "server_errors_5xx": self.server_errors,
            "p50_ms": round(self.percentile(0.5), 2),
            "p99_ms": round(self.percentile(0.99), 2),
            "refused_429": self.refused,
            "refused_p99_ms": round(percentile(self.refused_ms, 0.99), 2),
            "stored": self.stored,
            "lost": self.lost,
            "duplicates": self.duplicates,
        }


def chunk_record(parent_id: str, number: int) -> dict[str, object]:
    return {
        "context_id": f"ld_{secrets.token_hex(12)}",
        "parent_ids": [parent_id],
        "kind": "chunk",
        "content_hash": f"sha256:{secrets.token_hex(32)}",
        "transform": "chunker",
        "transform_version": "chunker@2.0",
        "attributes": {"offset": number * 512},
    }


async def seed_documents(server: Server, namespace: str) -> list[str]:
    """Parents for the load's records, appended in one batch before the clock starts."""
    documents = [
        {
            "context_id": f"{namespace}_doc_{n}",
            "kind": "document",
            "source_uri": f"s3://{namespace}/doc-{n}.md",
            "content_hash": f"sha256:{secrets.token_hex(32)}",
        }
        for n in range(SEED_DOCUMENTS)
    ]
    connection = await Connection.open(server.port)
    try:
        status, body = await connection.request(
            "POST", "/v1/contexts/batch", {"records": documents}, server.headers
        )
    finally:
        await connection.close()
    if status not in {200, 201}:
        raise RuntimeError(f"seeding the load's documents failed: {status} {body[:300]!r}")
    return [str(d["context_id"]) for d in documents]


async def run_load(
    server: Server,
    owner_url: str,
    tenant_id: str,
    rate: float | None,
    seconds: float,
    workers: int = 64,
) -> LoadResult:
    """Append single records at `rate` (None: each worker as fast as it gets answers) for
    `seconds`; count the acknowledged ones afterwards."""
    parents = await seed_documents(server, f"load{secrets.token_hex(4)}")
    result = LoadResult(rate_asked=rate or float("nan"), seconds=seconds)
    acknowledged_ids: list[str] = []
    start = time.perf_counter() + 0.2
    deadline = start + seconds

    def due_times(offset: int) -> Iterator[float]:
        if rate is None:
            while (now := time.perf_counter()) < deadline:
                yield now
        else:
            yield from (start + n / rate for n in range(offset, int(rate * seconds), workers))

    async def worker(offset: int) -> None:
        connection = await Connection.open(server.port)
        try:
            for number, due in enumerate(due_times(offset)):
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                record = chunk_record(parents[number % len(parents)], number)
                result.sent += 1
                try:
                    status, headers, _ = await connection.exchange(
                        "POST", "/v1/contexts", record, server.headers
                    )
                except (OSError, asyncio.IncompleteReadError):
                    result.transport_errors += 1
                    await connection.close()
                    connection = await Connection.open(server.port)
                    continue
                elapsed_ms = (time.perf_counter() - due) * 1000
                result.statuses[status] += 1
                if 200 <= status < 300:
                    result.latencies_ms.append(elapsed_ms)
                    result.acknowledged += 1
                    acknowledged_ids.append(str(record["context_id"]))
                elif status == 429:
                    result.refused_ms.append(elapsed_ms)
                    if rate is None:
                        await asyncio.sleep(float(headers.get("retry-after", "1")))
        finally:
            await connection.close()

    await asyncio.gather(*(worker(offset) for offset in range(workers)))
    result.seconds = max(seconds, time.perf_counter() - start)
    owner = await asyncpg.connect(owner_url)
    try:
        result.stored, distinct = await owner.fetchrow(
            "SELECT count(*), count(DISTINCT context_id) FROM provenance "
            "WHERE tenant_id = $1 AND context_id = ANY ($2::text[])",
            tenant_id,
            acknowledged_ids,
        )
        result.duplicates = result.stored - distinct
    finally:
        await owner.close()
    return result


async def main(arguments: argparse.Namespace) -> LoadResult:
    from bench.database import drop, recreate

    url = await recreate(arguments.server_url, arguments.database)
    try:
        with serving(url, {"LINEAGE_AUTH": "none"}) as server:
            return await run_load(server, url, "default", arguments.rate, arguments.seconds)
    finally:
        await drop(arguments.server_url, arguments.database)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--database", default="lineage_bench_load")
    parser.add_argument("--rate", type=float, default=3000.0, help="records per second")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to send")
    outcome = asyncio.run(main(parser.parse_args()))
    print(json.dumps(outcome.summary(), indent=2))
    if outcome.server_errors or outcome.lost or outcome.duplicates:
        raise SystemExit(1)
