"""Long commands in a log that no one watches live (cron, CI, a container): with stderr a pipe,
`export bundle` and `import` print progress lines (count, rate, time left) to stderr, stdout
stays data, and a command that waits for a lock says which lock and who holds it."""

import asyncio
import json
import os
import re
import sys
from pathlib import Path

import asyncpg
import pytest

from lineage.cli.progress import ProgressLines
from lineage.core.derive import Derivation, derive_many
from lineage.store.postgres import PostgresStore

# Starts commands of its own: outside the fast tier.
pytestmark = pytest.mark.slow

RECORDS = 3000


def test_progress_lines_give_the_count_the_rate_and_the_time_left() -> None:
    now = [0.0]
    lines: list[str] = []
    report = ProgressLines(lines.append, every_s=10, clock=lambda: now[0])
    report("sign a checkpoint")
    for second, done in ((1, 100), (5, 500), (10, 1000), (30, 3000)):
        now[0] = float(second)
        report("export records", done, 4000)
    now[0] = 40.0
    report("export texts", 7)
    report.close()
    assert lines == [
        "lineage: sign a checkpoint",
        "lineage: sign a checkpoint · done in 1 s",
        "lineage: export records · 100 of 4,000 (2%)",
        # 5 s later: too soon for another line; 10 s after the last one, the next.
        "lineage: export records · 3,000 of 4,000 (75%) · 103/s · about 10 s left",
        "lineage: export records · done, 3,000 of 4,000 in 39 s",
        "lineage: export texts · 7",
        "lineage: export texts · done, 7 in 0 s",
    ]


def test_quiet_progress_lines_wait_until_the_work_has_lasted() -> None:
    now = [0.0]
    lines: list[str] = []
    report = ProgressLines(lines.append, every_s=10, clock=lambda: now[0], quiet=True)
    report("walk back and mark")
    now[0] = 3.0
    report("render")  # the walk ended before anyone needed telling
    now[0] = 14.0
    report("render", 40, 50)
    report.close()
    assert lines == [
        "lineage: render · 40 of 50 (80%) · 4/s · about 3 s left",
        "lineage: render · done, 40 of 50 in 11 s",
    ]


async def load_records(store: PostgresStore) -> None:
    documents = RECORDS // 30
    items = [Derivation([], f"document {d}", "document", "loader", "1",
                        source_uri=f"s3://progress/{d}", context_id=f"progress_doc_{d}")
             for d in range(documents)]  # fmt: skip
    items += [Derivation([f"progress_doc_{c % documents}"], f"chunk {c}", "chunk", "chunker",
                         "2", context_id=f"progress_chunk_{c}")
              for c in range(RECORDS - documents)]  # fmt: skip
    await derive_many(store, items)


async def lineage(database_url: str, *arguments: str) -> asyncio.subprocess.Process:
    """`lineage ARGUMENTS` with stdout and stderr pipes, as under cron or in a container."""
    env = {key: value for key, value in os.environ.items() if key != "LINEAGE_PROGRESS"}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lineage", *arguments,
        env=env | {"LINEAGE_DATABASE_URL": database_url, "LINEAGE_PROGRESS_INTERVAL": "0",
                   "PYTHONUNBUFFERED": "1"},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def finished(process: asyncio.subprocess.Process) -> tuple[str, str]:
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()
    return out.decode(), err.decode()


async def test_export_and_import_print_progress_lines_on_a_pipe(
    store: PostgresStore, database_url: str, tmp_path: Path
) -> None:
    await load_records(store)
    bundle = tmp_path / "progress.bundle"
    export = await lineage(database_url, "export", "bundle", "--tenant", "default",
                           "--output", str(bundle))  # fmt: skip
    out, err = await finished(export)
    assert out == ""
    # The time left is left out under a second (the unit test above shows it).
    counted = re.compile(
        r"^lineage: export records · [\d,]+ of 3,000 \(\d+%\) · [\d,]+/s( · about .+ left)?$",
        re.MULTILINE,
    )
    assert counted.search(err), err
    assert "lineage: export records · done, 3,000 of 3,000 in" in err
    assert "\x1b[" not in err  # no terminal codes in a log

    imported = await lineage(database_url, "import", str(bundle), "--tenant", "copy")
    out, err = await finished(imported)
    assert json.loads(out)["records"] == RECORDS  # stdout is the summary alone
    assert re.search(r"^lineage: write · [\d,]+ of 3,000 \(\d+%\) · [\d,]+/s", err, re.MULTILINE)
    assert "lineage: write · done, 3,000 of 3,000 in" in err


async def test_a_command_waiting_for_a_lock_says_what_it_waits_for(database_url: str) -> None:
    holder = await asyncpg.connect(database_url)
    try:
        holder_pid = holder.get_server_pid()
        # A long reader of provenance, as a slow export or walk would be.
        transaction = holder.transaction()
        await transaction.start()
        await holder.execute("LOCK TABLE provenance IN ACCESS SHARE MODE")
        process = await lineage(database_url, "retention", "set", "12")
        assert process.stderr is not None
        said: list[str] = []
        while not any("waiting" in line for line in said):
            line = await asyncio.wait_for(process.stderr.readline(), 60)
            assert line, f"the command ended without saying it waited: {said}"
            said.append(line.decode())
        await transaction.rollback()
        out, _ = await finished(process)
    finally:
        await holder.close()
    waiting = next(line for line in said if "waiting" in line)
    assert re.match(r"lineage: waiting \d+ s for a lock: \w+Lock on provenance", waiting), waiting
    assert f"held by pid {holder_pid} (" in waiting and "idle in transaction" in waiting, waiting
    assert "LOCK TABLE provenance" in waiting
    assert "records kept at least 12 months" in out
