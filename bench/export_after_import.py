"""The first export of a bundle right after an import or a bulk load, against the same export
in steady state: issue 35 wants it within 1.5x.

    python -m bench.export_after_import --records 50000 --rounds 3

Each round, on fresh databases, four ways a tenant's log comes to be exported:
1. bulk load into a fresh database: documents and their chunks appended as a user appends them
   (derive_many, 1,000 records a call, as the application role), then the log sequenced and
   checkpointed as the service's background round does;
2. import of that tenant's bundle into a new tenant of the same database, whose statistics were
   taken while only the first tenant had rows (lineage.bundle's import_bundle, as `lineage
   import` runs it);
3. bulk load into a third tenant of that database, as in 1;
4. import of the bundle into a fresh database.
Each is exported right after, then again after a full VACUUM ANALYZE (steady state). Every
export is lineage.bundle's export_bundle as `lineage export bundle` runs it (as the owner, in
this process). Figures are medians over the rounds; each ratio is of medians.
"""

import argparse
import asyncio
import os
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from statistics import median

import asyncpg

from bench.database import drop, recreate
from bench.figures import Figure, Report
from lineage.bundle.export import export_bundle, stale_statistics
from lineage.bundle.load import import_bundle
from lineage.core.derive import Derivation, derive_many
from lineage.db.database import Database
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from lineage.verifiable_log import storage

SOURCE_DB = "lineage_bench_export_source"
TARGET_DB = "lineage_bench_export_target"
APPEND_BATCH = 1000  # records a derive_many call
CHUNKS_PER_DOCUMENT = 19
TARGET_RATIO = 1.5
# The four ways, in the order a round takes them: (tenant, database, how it is filled).
CASES = (
    ("loaded", "source", "bulk load into a fresh database"),
    ("imported", "source", "import into a new tenant beside an analyzed one"),
    ("loaded_beside", "source", "bulk load into a new tenant beside analyzed ones"),
    ("moved", "target", "import into a fresh database"),
)


class PhaseClock:
    """An export's progress, kept as when each of its phases began."""

    def __init__(self) -> None:
        self.began: dict[str, float] = {}

    def __call__(
        self, phase: str, done: int = 0, total: int | None = None, detail: str = ""
    ) -> None:
        self.began.setdefault(phase, time.perf_counter())

    def analyze_seconds(self, ended: float) -> float:
        """How long the export's ANALYZE of stale statistics took (0: it ran none)."""
        moments = sorted(self.began.values())
        for phase, began in self.began.items():
            if phase.startswith("analyze"):
                return min([moment for moment in moments if moment > began] + [ended]) - began
        return 0.0


@dataclass(frozen=True)
class Export:
    seconds: float
    analyze_seconds: float  # of `seconds`: refreshing the statistics it found stale
    stale: list[str]  # the tables whose statistics the export found stale


@dataclass(frozen=True)
class Case:
    """One tenant filled one way: how long that took, its first export, and its exports in
    steady state."""

    fill_seconds: float  # the appends, or the import (verify, write, sequence)
    sequence_seconds: float | None  # a bulk load's log sequenced, before its first export
    first: Export
    steady: list[Export]


@dataclass(frozen=True)
class Round:
    records: int
    cases: list[Case]  # as CASES
    load_average: float  # 1-minute, at the round's end


async def append_documents_and_chunks(database: Database, tenant_id: str, records: int) -> None:
    """`records` documents and chunks, as a pipeline would record them: every document first,
    then its chunks, each naming its document."""
    store = PostgresStore(database, tenant_id)
    documents = max(1, records // (CHUNKS_PER_DOCUMENT + 1))
    items = [Derivation([], f"document {d}", "document", "loader", "1",
                        source_uri=f"s3://bench/documents/{d}.pdf")
             for d in range(documents)]  # fmt: skip
    document_ids: list[str] = []
    for start in range(0, documents, APPEND_BATCH):
        appended = await derive_many(store, items[start : start + APPEND_BATCH])
        document_ids += [context.context_id for context in appended]
    chunks = [Derivation([document_ids[c % documents]], f"chunk {c} of document {c % documents}",
                         "chunk", "chunker", "2")
              for c in range(records - documents)]  # fmt: skip
    for start in range(0, len(chunks), APPEND_BATCH):
        await derive_many(store, chunks[start : start + APPEND_BATCH])


async def timed_export(
    owner: Database, settings: Settings, tenant_id: str, tree_size: int, bundle: Path
) -> Export:
    """One export_bundle, timed, with what it found stale before it ran."""
    stale = await stale_statistics(owner, tenant_id, tree_size)
    clock = PhaseClock()
    started = time.perf_counter()
    exported = await export_bundle(
        owner, settings, tenant_id, bundle, include_text=False, progress=clock
    )
    ended = time.perf_counter()
    if exported.tree_size != tree_size:
        raise RuntimeError(f"exported {exported.tree_size} of {tree_size} records")
    return Export(ended - started, clock.analyze_seconds(ended), stale)


async def first_then_steady(
    owner: Database, settings: Settings, tenant_id: str, tree_size: int, bundle: Path,
    steady: int,
) -> tuple[Export, list[Export]]:  # fmt: skip
    """The first export of the tenant as it was left, then `steady` exports after a full
    VACUUM ANALYZE."""
    first = await timed_export(owner, settings, tenant_id, tree_size, bundle)
    async with owner.connection() as connection:
        await connection.execute("VACUUM ANALYZE")
    exports = [await timed_export(owner, settings, tenant_id, tree_size, bundle)
               for _ in range(steady)]  # fmt: skip
    return first, exports


async def bulk_load(
    owner: Database, settings: Settings, url: str, tenant_id: str, records: int
) -> tuple[float, float]:
    """Append the tenant's records as the application role, then sequence its log; how long
    each took."""
    async with owner.tenant(tenant_id) as tx:
        await tx.fetch("tenant_create")
    application = await Database.connect(settings, url, max_size=2)
    try:
        started = time.perf_counter()
        await append_documents_and_chunks(application, tenant_id, records)
        appended = time.perf_counter()
    finally:
        await application.close()
    signed = await storage.checkpoint(owner, settings, tenant_id)
    if signed.checkpoint.tree_size != records:
        raise RuntimeError(f"the log holds {signed.checkpoint.tree_size} of {records} records")
    return appended - started, time.perf_counter() - appended


async def measure_round(
    records: int, server_url: str, work_dir: Path, steady: int, tag: str = ""
) -> Round:
    """One round on fresh databases, dropped after; `tag` keeps concurrent runs apart."""
    settings = Settings(data_dir=work_dir)
    verifier = storage.signing_key(settings).verifier
    names = {"source": SOURCE_DB + tag, "target": TARGET_DB + tag}
    urls = {place: await recreate(server_url, name) for place, name in names.items()}
    owners = {place: await Database.connect(settings, url, max_size=2, as_owner=True)
              for place, url in urls.items()}  # fmt: skip
    bundle = work_dir / "loaded.bundle"
    try:
        cases = []
        for tenant_id, place, _ in CASES:
            owner = owners[place]
            sequence_seconds: float | None = None
            if tenant_id.startswith("loaded"):
                fill_seconds, sequence_seconds = await bulk_load(
                    owner, settings, urls[place], tenant_id, records
                )
            else:
                started = time.perf_counter()
                imported = await import_bundle(owner, settings, bundle, tenant_id, verifier)
                fill_seconds = time.perf_counter() - started
                if imported.tree_size != records:
                    raise RuntimeError(f"imported {imported.tree_size} of {records} records")
            written = work_dir / f"{tenant_id}.bundle"
            first, exports = await first_then_steady(
                owner, settings, tenant_id, records, written, steady
            )
            cases.append(Case(fill_seconds, sequence_seconds, first, exports))
        return Round(records, cases, os.getloadavg()[0])
    finally:
        for owner in owners.values():
            await owner.close()
        for name in names.values():
            await drop(server_url, name)


def _case_figures(report: Report, group: str, cases: list[Case]) -> None:
    """The case's figures into the report: how long filling it took, its exports and their
    ratio."""
    first = median([case.first.seconds for case in cases])
    steady = median([export.seconds for case in cases for export in case.steady])
    stale = sorted({table for case in cases for table in case.first.stale})
    analyze = median([case.first.analyze_seconds for case in cases])
    rounds = len(cases)
    fill = ("append (derive_many, 1,000 records a call)" if cases[0].sequence_seconds is not None
            else "import_bundle (verify, write, sequence)")  # fmt: skip
    report.add(Figure(group, fill, "s", median([c.fill_seconds for c in cases]), samples=rounds))
    sequenced = [case.sequence_seconds for case in cases if case.sequence_seconds is not None]
    if sequenced:
        report.add(Figure(group, "sequence and checkpoint the log", "s", median(sequenced),
                          samples=rounds))  # fmt: skip
    report.add(
        Figure(group, "first export, right after", "s", first, samples=rounds,
               note=(f"found stale: {', '.join(stale)}; its ANALYZE took {analyze:.2f} s"
                     if stale else "found no stale statistics"))
    )  # fmt: skip
    report.add(
        Figure(group, "export in steady state (after VACUUM ANALYZE)", "s", steady,
               samples=sum(len(case.steady) for case in cases))
    )  # fmt: skip
    ratio = first / steady
    report.add(
        Figure(group, "first export / steady state", "x", ratio, samples=rounds,
               target=f"<= {TARGET_RATIO}x", met=ratio <= TARGET_RATIO,
               note="per round: " + ", ".join(
                   f"{case.first.seconds / median([e.seconds for e in case.steady]):.2f}x"
                   for case in cases))
    )  # fmt: skip


def report(rounds: list[Round], context: dict[str, str]) -> Report:
    made = Report(f"First export after an import or a bulk load: {rounds[0].records:,} records",
                  context)  # fmt: skip
    for number, (_, _, group) in enumerate(CASES):
        _case_figures(made, group, [r.cases[number] for r in rounds])
    made.notes.append(
        "1-minute load average at the end of each round: "
        + ", ".join(f"{r.load_average:.2f}" for r in rounds)
    )
    return made


async def server_version(server_url: str) -> str:
    connection = await asyncpg.connect(server_url)
    try:
        version: str = await connection.fetchval("SHOW server_version")
        return version
    finally:
        await connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000, help="records in the tenant")
    parser.add_argument("--rounds", type=int, default=3, help="rounds on fresh databases")
    parser.add_argument("--steady", type=int, default=3, help="steady-state exports a round")
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--output", type=Path, default=Path("bench/RESULTS-export-after-import.md"))
    arguments = parser.parse_args()
    began = datetime.now(UTC)
    load_before = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    version = asyncio.run(server_version(arguments.server_url))
    rounds: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="lineage-bench-export-") as work_dir:
        for number in range(arguments.rounds):
            # A data folder a round: its log witness remembers the last round's checkpoints.
            round_dir = Path(work_dir) / f"round-{number + 1}"
            round_dir.mkdir()
            measured = measure_round(
                arguments.records, arguments.server_url, round_dir, arguments.steady
            )
            rounds.append(asyncio.run(measured))
            context = {
                "command": f"`python -m bench.export_after_import --records {arguments.records} "
                f"--rounds {arguments.rounds} --steady {arguments.steady}`"
                + ("" if number + 1 == arguments.rounds else f" ({number + 1} rounds so far)"),
                "server": f"{arguments.server_url.rsplit('@', 1)[-1]}, PostgreSQL {version}",
                "when": f"{began:%Y-%m-%d %H:%M}-{datetime.now(UTC):%H:%M} UTC",
                "machine": f"{os.cpu_count()} cores, load average (1, 5, 15 min) {load_before} "
                f"at the start, {', '.join(f'{v:.2f}' for v in os.getloadavg())} at the end",
            }
            # Written after every round, so that a long run shows what it has so far.
            text = report(rounds, context).markdown()
            arguments.output.write_text(text)
            print(text, flush=True)


if __name__ == "__main__":
    main()
