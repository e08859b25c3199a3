"""The cost of vouching for the tenant (migration 0013) on a walk-back: the same walks with the
policies' tenant check as it is (HMAC token verified) and as it was before (setting only),
alternated. `python -m bench.tenant_binding --server postgresql://postgres@127.0.0.1/postgres`
"""

import argparse
import asyncio
import statistics
import time
import uuid

import asyncpg

from bench.run import ingest_rows, proposals
from lineage import db
from lineage.db.database import Database
from lineage.db.migrate import migrate
from lineage.services import auth
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore

TENANT = "bench"
UNVOUCHED = """
CREATE OR REPLACE FUNCTION lineage_session_tenant() RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tenant text := current_setting('lineage.tenant_id', true);
BEGIN
    IF coalesce(tenant, '') = '' AND current_user = 'lineage_app' THEN
        RAISE EXCEPTION 'lineage.tenant_id is not set';
    END IF;
    RETURN tenant;
END
$$"""


async def walk_times(pool: asyncpg.Pool, ids: list[str], runs: int) -> list[float]:
    times = []
    for run in range(runs):
        started = time.perf_counter()
        async with db.transaction(pool, TENANT) as connection:
            await db.fetch(
                connection, "walk_back", tenant_id=TENANT, context_id=ids[run % len(ids)],
                max_depth=20,
            )  # fmt: skip
        times.append((time.perf_counter() - started) * 1000)
    return times


async def main(server: str, records: int, runs: int, rounds: int) -> None:
    name = f"bench_binding_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(server)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = server.rsplit("/", 1)[0] + "/" + name
    try:
        migrate(url)
        owner_pool = await db.create_pool(url, max_size=1, as_owner=True)
        await auth.create_tenant(Database(owner_pool, Settings()), TENANT)
        await owner_pool.close()
        pool = await db.create_pool(url, max_size=2)
        generated = proposals(ingest_rows(records, "binding", TENANT))
        store = PostgresStore(Database(pool, Settings()), TENANT)
        for start in range(0, len(generated), 500):
            await store.append(generated[start : start + 500])
        answers = [r.context_id for r in generated if r.kind == "answer"][:50]
        owner = await asyncpg.connect(url)
        vouched = (await owner.fetchval(
            "SELECT pg_get_functiondef('lineage_session_tenant()'::regprocedure)"
        ))  # fmt: skip
        medians: dict[str, list[float]] = {"vouched": [], "setting only": []}
        await walk_times(pool, answers, 20)  # warm-up
        for _ in range(rounds):
            for label, definition in (("vouched", vouched), ("setting only", UNVOUCHED)):
                await owner.execute(definition)
                medians[label].append(statistics.median(await walk_times(pool, answers, runs)))
        await owner.close()
        await pool.close()
        for label, values in medians.items():
            shown = ", ".join(f"{v:.2f}" for v in values)
            print(f"{label}: median walk-back ms per round of {runs}: {shown}")
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", required=True)
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.server, arguments.records, arguments.runs, arguments.rounds))
