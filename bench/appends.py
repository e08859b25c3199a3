"""Concurrent appends to one tenant against appends spread over tenants: what numbering the event
stream per tenant costs (each append holds its tenant's counter from numbering to commit).

    python -m bench.appends --server postgresql://postgres@127.0.0.1:5432/postgres

A fresh database; `--writers` tasks each append `--appends` batches of `--batch` documents
(its own transaction each, through lineage.services.appends.append_records), either all to tenant
`default` or each to a tenant of its own. Reported per layout: appends/s and records/s, and the
p50/p99 latency of one append's transaction (commit included).
"""

import argparse
import asyncio
import json
import statistics
import time

from bench.database import drop, recreate
from lineage import db
from lineage.core.derive import Derivation, propose
from lineage.db.database import Database
from lineage.services import auth
from lineage.services.appends import append_records
from lineage.settings import Settings


def document(text: str, writer_name: str, path: str) -> Derivation:
    # Its own transform per writer: writers noting one new version would wait on its row.
    return Derivation(
        [], text, "document", f"loader_{writer_name}", "1", source_uri=f"s3://{writer_name}/{path}"
    )


async def writer(
    database: Database, tenant_id: str, name: str, appends: int, batch: int
) -> list[float]:
    latencies = []
    for number in range(appends):
        proposals = [
            propose(tenant_id, document(f"{name} {number} {i}", name, f"{number}/{i}"))
            for i in range(batch)
        ]
        started = time.perf_counter()
        async with database.tenant(tenant_id) as tx:
            await append_records(tx, proposals)
        latencies.append(time.perf_counter() - started)
    return latencies


async def run(url: str, tenants: list[str], appends: int, batch: int) -> dict[str, float]:
    database = await Database.connect(Settings(), url, min_size=len(tenants), max_size=len(tenants))
    try:
        started = time.perf_counter()
        per_writer = await asyncio.gather(
            *(
                writer(database, tenant, f"w{index}", appends, batch)
                for index, tenant in enumerate(tenants)
            )
        )
        elapsed = time.perf_counter() - started
    finally:
        await database.close()
    latencies = sorted(latency for found in per_writer for latency in found)
    count = len(latencies)
    return {
        "appends_per_s": round(count / elapsed, 1),
        "records_per_s": round(count * batch / elapsed, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(latencies[min(count - 1, int(count * 0.99))] * 1000, 2),
    }


async def main(arguments: argparse.Namespace) -> dict[str, dict[str, float]]:
    results = {}
    for layout in ("one_tenant", "tenant_per_writer"):
        url = await recreate(arguments.server, arguments.dbname)
        try:
            tenants = ["default"] * arguments.writers
            if layout == "tenant_per_writer":
                owner = await db.create_pool(url, max_size=1, as_owner=True)
                tenants = [f"t{index}" for index in range(arguments.writers)]
                for tenant in tenants:
                    await auth.create_tenant(Database(owner, Settings()), tenant)
                await owner.close()
            results[layout] = await run(url, tenants, arguments.appends, arguments.batch)
        finally:
            await drop(arguments.server, arguments.dbname)
    return results


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True, help="a PostgreSQL server URL")
    parser.add_argument("--dbname", default="lineage_bench_appends")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--appends", type=int, default=200, help="per writer")
    parser.add_argument("--batch", type=int, default=1, help="records per append")
    return parser.parse_args()


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(parse_arguments())), indent=2))
