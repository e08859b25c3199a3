"""How long the marks of a 1,000-record walk-back take (sql/suspicious_hops.sql, as GET
/v1/contexts/{id}/suspicious runs it): the walk the explorer's test draws, loaded into a
database of its own, the query run several times, the median printed.

    python -m bench.suspicious --server-url postgresql://postgres@127.0.0.1:5432/postgres
    python -m bench.suspicious --revised   # half the documents revised after the snapshot
"""

import argparse
import asyncio
import statistics
import time

from bench.database import drop, recreate
from lineage.core.derive import Derivation, derive_many
from lineage.db.database import Database
from lineage.services import walks
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore

DATABASE = "lineage_bench_suspicious"


async def load_thousand_record_walk(store: PostgresStore) -> str:
    """40 documents, 800 chunks, a query, 150 retrievals of 6 chunks each, 5 summaries of 30
    retrievals, 3 claims and an answer: 1,000 records in one walk-back."""
    items = [Derivation([], f"doc {d}", "document", "loader", "1", source_uri=f"s3://big/{d}",
                        context_id=f"big_doc_{d}") for d in range(40)]  # fmt: skip
    items += [Derivation([f"big_doc_{c // 20}"], f"chunk {c}", "chunk", "chunker", "2",
                         index_snapshot="idx_big", context_id=f"big_chunk_{c}")
              for c in range(800)]  # fmt: skip
    items.append(Derivation([], "the question", "query", source_uri="chat://big",
                            context_id="big_query"))  # fmt: skip
    # Six neighbouring chunks each (all 800 between them) and one from across the corpus.
    picked = [list(dict.fromkeys(f"big_chunk_{i % 800}" for i in [*range(r * 6, r * 6 + 6),
                                                                  r * 37 + 400]))
              for r in range(150)]  # fmt: skip
    items += [Derivation(["big_query", *picked[r]],
                         f"retrieval {r}", "retrieval", "retriever", "1", index_snapshot="idx_big",
                         context_id=f"big_retrieval_{r}") for r in range(150)]  # fmt: skip
    items += [Derivation([f"big_retrieval_{r}" for r in range(s, 150, 5)], f"summary {s}",
                         "summary", "summarise", "1", produced_by="agent/summarise@v1",
                         context_id=f"big_summary_{s}") for s in range(5)]  # fmt: skip
    items += [Derivation([f"big_summary_{c}", f"big_summary_{c + 2}"], f"claim {c}", "claim",
                         "answer", "1", produced_by="agent/answer@v1", context_id=f"big_claim_{c}")
              for c in range(3)]  # fmt: skip
    items.append(Derivation(["big_claim_0", "big_claim_1", "big_claim_2", "big_query"], "answer",
                            "answer", "answer", "1", produced_by="agent/answer@v1",
                            context_id="big_answer"))  # fmt: skip
    assert len(items) == 1000
    await derive_many(store, items)
    return "big_answer"


async def revise_half(store: PostgresStore) -> None:
    """A newer revision of every other document, recorded after the index snapshot: 583 marks."""
    await derive_many(store, [Derivation([], f"doc {d} v2", "document", "loader", "1",
                                         source_uri=f"s3://big/{d}", context_id=f"big_doc_{d}_v2")
                              for d in range(0, 40, 2)])  # fmt: skip


async def main(server_url: str, runs: int, revised: bool) -> None:
    url = await recreate(server_url, DATABASE)
    settings = Settings(statement_timeout_ms=60_000)
    database = await Database.connect(settings, url, max_size=2)
    try:
        store = PostgresStore(database)
        answer = await load_thousand_record_walk(store)
        if revised:
            await revise_half(store)
        seconds, marks = [], 0
        for _ in range(runs):
            started = time.perf_counter()
            marks = len(await walks.suspicious_hops(database, settings, "default", answer, None))
            seconds.append(time.perf_counter() - started)
        print(
            f"suspicious hops of a 1,000-record walk{' (half revised)' if revised else ''}: "
            f"{marks} marks, median {statistics.median(seconds) * 1000:.0f} ms of {runs} runs "
            f"({', '.join(f'{s * 1000:.0f}' for s in seconds)} ms)"
        )
    finally:
        await database.close()
        await drop(server_url, DATABASE)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--revised", action="store_true")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.server_url, arguments.runs, arguments.revised))
