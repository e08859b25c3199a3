"""Export and import of a tenant's bundle at size: records/s and the peak memory of each command.

    python -m bench.lifecycle --size 1M --server-url postgresql://postgres@127.0.0.1:5432/postgres

Loads the synthetic DAG (bench/dag.py) into a database of its own, puts every record in the
verifiable log, then runs `lineage export bundle` and `lineage import` (into a second database)
as child processes, timing each and reading its peak resident memory from the kernel
(`wait4`). The DAG is loaded by COPY, so its records carry no signatures: the import checks the
Merkle tree and checkpoint of every record but no HMAC.
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from bench.dag import parse_size
from bench.database import drop, load, recreate
from lineage import db
from lineage.db.database import Database
from lineage.settings import Settings
from lineage.verifiable_log import storage

SOURCE_DB = "lineage_bench_lifecycle_source"
TARGET_DB = "lineage_bench_lifecycle_target"


# Runs the CLI in this interpreter and writes its peak resident memory (VmHWM, of this process
# alone: wait4's ru_maxrss would count the parent's memory at fork) to the file named first.
PEAK_WRAPPER = """
import atexit, runpy, sys
peak_file = sys.argv.pop(1)
def write_peak():
    status = open('/proc/self/status').read().splitlines()
    kib = next(line.split()[1] for line in status if line.startswith('VmHWM:'))
    open(peak_file, 'w').write(kib)
atexit.register(write_peak)
sys.argv[0] = 'lineage'
runpy.run_module('lineage', run_name='__main__', alter_sys=True)
"""


@dataclass(frozen=True)
class Run:
    seconds: float
    peak_rss_mb: float
    output: str


@dataclass(frozen=True)
class Figures:
    records: int
    bundle_mb: float
    sequence_s: float
    export: Run
    imported: Run

    def markdown(self, server: str) -> str:
        def row(name: str, run: Run) -> str:
            rate = self.records / run.seconds
            return f"| {name} | {run.seconds:.1f} | {rate:,.0f} | {run.peak_rss_mb:.0f} |"

        return "\n".join(
            [
                f"# Export and import of a bundle: {self.records:,} records",
                "",
                f"Server: {server}. Bundle: {self.bundle_mb:.0f} MB. Putting the COPY-loaded "
                f"records into the log first took {self.sequence_s:.1f} s (not part of either).",
                "",
                "| command | seconds | records/s | peak RSS (MB) |",
                "| --- | --- | --- | --- |",
                row("lineage export bundle", self.export),
                row("lineage import (verify, then write)", self.imported),
                "",
                "Where the import's time went (seconds): "
                + ", ".join(f"{phase} {took}" for phase, took in self.import_phases().items())
                + " (verify: reading and hashing the whole bundle; write: reading it again and "
                "inserting, one transaction; log: sequencing and checkpointing the new log).",
                "",
            ]
        )

    def import_phases(self) -> dict[str, float]:
        phases: dict[str, float] = json.loads(self.imported.output)["seconds"]
        return phases


def timed_command(arguments: list[str], env: dict[str, str], work_dir: Path) -> Run:
    """Run a lineage command in a child process: its wall time, peak memory and output."""
    peak_file = work_dir / "peak-kib"
    argv = [sys.executable, "-c", PEAK_WRAPPER, str(peak_file), *arguments]
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"lineage {' '.join(arguments)} failed:\n{done.stdout}{done.stderr}")
    return Run(seconds, int(peak_file.read_text()) / 1024, done.stdout)


# The loaded records as the stream's events (the log's queue), and the counter after them.
QUEUE_EVERYTHING = """
INSERT INTO events (tenant_id, position, context_id)
SELECT tenant_id, row_number() OVER (PARTITION BY tenant_id ORDER BY ctid), context_id
FROM provenance;
INSERT INTO tenant_counters (tenant_id, counter, last_value)
SELECT tenant_id, 'events', max(position) FROM events GROUP BY tenant_id
ON CONFLICT (tenant_id, counter) DO UPDATE SET last_value = excluded.last_value
"""


async def log_everything(url: str) -> float:
    """Queue every loaded record in the order COPY wrote them (parents first, as the service's
    appends are queued; ctid order, as nothing has updated or deleted a row), and sequence them."""
    pool = await db.create_pool(url, max_size=2, as_owner=True)
    try:
        await pool.execute(QUEUE_EVERYTHING)
        started = time.perf_counter()
        await storage.sequence(Database(pool, Settings()), "default")
        return time.perf_counter() - started
    finally:
        await pool.close()


async def count_records(url: str) -> int:
    connection = await asyncpg.connect(url)
    try:
        count: int = await connection.fetchval("SELECT count(*) FROM provenance")
        return count
    finally:
        await connection.close()


async def measure(records: int, server_url: str, work_dir: Path, tag: str = "") -> Figures:
    """`tag` ends the two databases' names, so that runs on one server keep apart."""
    source_db, target_db = SOURCE_DB + tag, TARGET_DB + tag
    source = await recreate(server_url, source_db)
    target = await recreate(server_url, target_db)
    try:
        await load(source, records)
        records = await count_records(source)  # whole documents: a few more than asked
        sequence_s = await log_everything(source)
        bundle = work_dir / "default.bundle"
        env = os.environ | {"LINEAGE_DATA_DIR": str(work_dir)}
        export = timed_command(
            ["export", "bundle", "--tenant", "default", "--output", str(bundle)],
            env | {"LINEAGE_DATABASE_URL": source},
            work_dir,
        )
        imported = timed_command(
            ["import", str(bundle), "--tenant", "default"],
            env | {"LINEAGE_DATABASE_URL": target},
            work_dir,
        )
        copied = await count_records(target)
        if copied != records:
            raise RuntimeError(f"the import wrote {copied} of {records} records")
        return Figures(records, bundle.stat().st_size / 2**20, sequence_s, export, imported)
    finally:
        await drop(server_url, source_db)
        await drop(server_url, target_db)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="100k", help="100k, 1M or a number of records")
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--output", type=Path, default=Path("bench/RESULTS-lifecycle.md"))
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lineage-bench-lifecycle-") as work_dir:
        figures = asyncio.run(
            measure(parse_size(arguments.size), arguments.server_url, Path(work_dir))
        )
    text = figures.markdown(arguments.server_url.rsplit("@", 1)[-1])
    arguments.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
