"""A walk-back's cost through the service (walks.walk_back: one call of lineage_walk_back, the
rows made nodes), through the service as before migration 0043 (its own tenant transaction),
beside the same statement in an open transaction and the tutorial SQL, interleaved answer by
answer, on a database `python -m bench` loaded (its bench_picks), with two sides that say where
the service's time goes (the statement as the owner, without row security or a function; the
one call fetched but not decoded); then a record read by id the same ways (records.record_node:
one call of lineage_get_contexts since migration 0044, beside the primary-key probe the tutorial
runs), and a page of 100 answers after each (reads.list_contexts: one call of
lineage_list_contexts since 0045, beside the tutorial's keyset page), and the first page of 100
answers since each one's time:

    python -m bench.walk_service --url postgresql://postgres@127.0.0.1:5432/lineage_bench_classic_public_classic_provenance

The sides take turns answer by answer, each answer's turn starting at the next side, twice over;
the p50 of the second pass is reported.
"""

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from bench import features
from bench.baselines import TUTORIAL_WALK_BACK
from bench.database import saved_picks
from bench.run import TENANT
from lineage import db
from lineage.db.database import Database
from lineage.services import reads, records, walks
from lineage.settings import Settings

# The record by id as a user of the tutorial table reads it.
TUTORIAL_RECORD = "SELECT * FROM provenance WHERE tenant_id = $1 AND context_id = $2"
# A page of 100 answers after one, oldest first, as a user of the tutorial table lists them.
TUTORIAL_PAGE = """SELECT * FROM provenance
WHERE tenant_id = $1 AND kind = 'answer' AND (created_at, context_id) > ($2, $3)
ORDER BY created_at, context_id LIMIT 100"""
# The first page of 100 answers from one's time on, as the tutorial's user lists them.
TUTORIAL_SINCE = """SELECT * FROM provenance
WHERE tenant_id = $1 AND kind = 'answer' AND created_at >= $2
ORDER BY created_at, context_id LIMIT 100"""
PAGE = {"kind": "answer", "since": datetime.min.replace(tzinfo=UTC), "page_size": 100}
PAGE |= {"until": datetime.max.replace(tzinfo=UTC)}
PAGE |= dict.fromkeys(("source_uri", "trace_id", "produced_by", "session_id"), "any")
# The one call walks.walk_back sends (reads.fetch_records_json over lineage_walk_back).
WALK_CALL = reads.one_call_sql("walk_back", 3, reads.RECORDS_JSON_ARRAY)


def walk_statement(connection: Any, answer: str) -> Awaitable[Any]:
    return db.fetch(connection, "walk_back", tenant_id=TENANT, context_id=answer, max_depth=20)


async def walk_call_undecoded(pool: Any, token: str, answer: str) -> bytes:
    """lineage_walk_back's records as the JSON the service fetches, the pool's acquire and
    release included, not decoded: what the service's Python adds is the rest."""
    async with pool.acquire() as connection:
        records: bytes = await connection.fetchval(WALK_CALL, answer, TENANT, 20, token, None)
    return records


def page_after(
    database: Database, settings: Settings, created: dict[str, datetime], answer: str
) -> Awaitable[Any]:
    """reads.list_contexts' page of 100 answers after this one."""
    after = {"after_created_at": created[answer], "after_context_id": answer}
    return reads.list_contexts(database, settings, tenant_id=TENANT, **PAGE, **after)


def page_since(
    database: Database, settings: Settings, created: dict[str, datetime], answer: str
) -> Awaitable[Any]:
    """reads.list_contexts' first page of 100 answers since this one's time."""
    first = {"since": created[answer], "after_created_at": PAGE["since"], "after_context_id": ""}
    return reads.list_contexts(database, settings, tenant_id=TENANT, **(PAGE | first))


async def main(url: str, answers: int) -> None:
    picks = await saved_picks(url)
    if picks is None:
        raise SystemExit(f"{url} holds no bench_picks: load it with python -m bench first")
    sampled = picks.answer_ids[:answers]
    pool = await db.create_pool(url, min_size=1, max_size=2)
    transacted = await db.create_pool(url, min_size=1, max_size=1)
    async with transacted.acquire() as connection:
        connection._con.one_call_reads = False  # the driver's connection: as before 0043
    theirs = await features.superuser_pool(url)
    settings = Settings()
    database = Database(pool, settings)
    before = Database(transacted, settings)
    async with pool.acquire() as connection:
        token = db.tenant_token(connection.vouching_key, TENANT)
    try:
        async with (
            theirs.acquire() as tutorial,
            theirs.acquire() as owner,
            db.transaction(pool, TENANT) as ours,
        ):
            await tutorial.execute("SET jit = on")
            await owner.execute("SET jit = off")  # as in lineage_walk_back
            walk_sides: dict[str, Callable[[str], Awaitable[Any]]] = {
                "tutorial SQL": partial(tutorial.fetch, TUTORIAL_WALK_BACK, TENANT),
                "sql/walk_back.sql as the owner (no row security)": partial(walk_statement, owner),
                "lineage_walk_back's JSON, not decoded": partial(walk_call_undecoded, pool, token),
                "sql/walk_back.sql in an open transaction": partial(walk_statement, ours),
                "service (walks.walk_back, one call)": lambda answer: walks.walk_back(
                    database, settings, TENANT, answer, None
                ),
                "service in its own transaction (before 0043)": lambda answer: walks.walk_back(
                    before, settings, TENANT, answer, None
                ),
            }
            record_sides: dict[str, Callable[[str], Awaitable[Any]]] = {
                "tutorial SQL": partial(tutorial.fetch, TUTORIAL_RECORD, TENANT),
                "service (records.record_node, one call)": lambda answer: records.record_node(
                    database, settings, TENANT, answer
                ),
                "service in its own transaction (before 0044)": lambda answer: records.record_node(
                    before, settings, TENANT, answer
                ),
            }
            created = dict(
                await tutorial.fetch(
                    "SELECT context_id, created_at FROM provenance "
                    "WHERE tenant_id = $1 AND context_id = ANY ($2)",
                    TENANT,
                    sampled,
                )
            )
            page_sides: dict[str, Callable[[str], Awaitable[Any]]] = {
                "tutorial SQL": lambda answer: tutorial.fetch(
                    TUTORIAL_PAGE, TENANT, created[answer], answer
                ),
                "service (reads.list_contexts, one call)": partial(
                    page_after, database, settings, created
                ),
                "service in its own transaction (before 0045)": partial(
                    page_after, before, settings, created
                ),
            }
            since_sides: dict[str, Callable[[str], Awaitable[Any]]] = {
                "tutorial SQL": lambda answer: tutorial.fetch(
                    TUTORIAL_SINCE, TENANT, created[answer]
                ),
                "service (reads.list_contexts, one call)": partial(
                    page_since, database, settings, created
                ),
            }
            for title, sides in (
                ("walk-back", walk_sides),
                ("record by id", record_sides),
                ("page of 100 answers", page_sides),
                ("first page of 100 answers since one's time", since_sides),
            ):
                samples = await interleaved(sides, sampled)
                p50 = {name: statistics.median(runs) * 1000 for name, runs in samples.items()}
                print(f"{title}, p50 of {len(sampled)} answers:")
                for name, value in p50.items():
                    ratio = value / p50["tutorial SQL"]
                    print(f"  {name:48s} {value:.3f} ms  {ratio:.2f}x the tutorial")
    finally:
        await pool.close()
        await transacted.close()
        await theirs.close()


async def interleaved(
    sides: dict[str, Callable[[str], Awaitable[Any]]], answers: list[str]
) -> dict[str, list[float]]:
    """Each side's seconds an answer, taking turns; the first pass warms the caches, untimed.
    Each answer starts the turn at the next side: whichever runs first after another answer
    pays for it (0.06-0.07 ms a walk-back at 200,000 records), and a fixed order charged the
    first side alone."""
    samples: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for number, answer in enumerate(answers * 2):
        turn = number % len(names)
        for name in names[turn:] + names[:turn]:
            started = time.perf_counter()
            await sides[name](answer)
            if number >= len(answers):
                samples[name].append(time.perf_counter() - started)
    return samples


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--answers", type=int, default=300)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.url, arguments.answers))
