"""The command line on a terminal: help that wraps where the terminal ends, not where the source
did; output that reads at 80 columns; long listings summarised; progress on stderr only."""

import asyncio
import csv
import io
import json
import re
import shlex
import uuid
from datetime import UTC, datetime
from pathlib import Path

from typer.main import get_command
from typer.testing import CliRunner, Result

import lineage
from lineage.cli import app
from lineage.cli.render import LISTED_ROWS
from lineage.core.derive import Derivation, derive_many
from lineage.core.record import NewContext
from lineage.services.demo import CONTRACTOR_POLICY
from lineage.services.reads import ID_FILE_COLUMNS
from lineage.store.postgres import PostgresStore
from lineage.store.spool import SpooledBatch, SpoolFile
from tests.conftest import janitor, url_for


def command_paths(command: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group of the tree, the root included."""
    paths = [path]
    for name, sub in getattr(command, "commands", {}).items():
        paths += command_paths(sub, (*path, name))
    return paths


def help_text(path: tuple[str, ...], columns: int) -> str:
    result = CliRunner().invoke(
        app, [*path, "--help"], env={"COLUMNS": str(columns)}, terminal_width=columns
    )
    assert result.exit_code == 0, (path, result.output)
    return result.output


def broken_wraps(text: str) -> list[str]:
    """Lines that continue a sentence on a terminal wide enough to hold every sentence on one
    line: a panel row whose first columns are blank, or a second line of a paragraph."""
    lines = [line.rstrip() for line in text.splitlines()]
    broken = []
    for before, line in zip(["", *lines], lines, strict=False):
        if line.startswith("│"):
            row = line.strip("│ ")
            if line[1:].startswith(" " * 6) and row and not row.startswith("-"):  # not -v
                broken.append(row)
        elif (
            line.strip()
            and before.strip()
            and not before.lstrip().startswith(("Usage", "╰"))
            and not line.startswith(("╭", "╰"))
        ):
            broken.append(line.strip())
    return broken


def test_every_help_wraps_only_where_the_terminal_ends() -> None:
    paths = command_paths(get_command(app))
    assert len(paths) > 40  # the whole tree: groups, their commands, the root
    broken = {" ".join(path): broken_wraps(help_text(path, 400)) for path in paths}
    assert {name: lines for name, lines in broken.items() if lines} == {}
    too_wide = {
        " ".join(path): [line for line in help_text(path, 80).splitlines() if len(line) > 80]
        for path in paths
    }
    assert {name: lines for name, lines in too_wide.items() if lines} == {}


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BAR = "━"


def invoke(env: dict[str, str], *args: str) -> Result:
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, (args, result.output, result.exception)
    assert "\x1b[" not in result.stdout, args  # the bar's console is the one forced to draw
    return result


def drawn(result: Result) -> str:
    """The progress the command drew on stderr, control sequences removed."""
    return ANSI.sub("", result.stderr)


def test_long_commands_draw_progress_on_stderr_and_leave_stdout_parseable(
    database_url: str, isolated_data_dir: Path, tmp_path: Path
) -> None:
    # The session's data directory: the process signs with the keyring it found there first.
    env = {"LINEAGE_DATABASE_URL": database_url, "LINEAGE_PROGRESS": "always", "COLUMNS": "120"}
    invoke(env, "demo")
    bundle = tmp_path / "default.bundle"
    exported = drawn(
        invoke(env, "export", "bundle", "--tenant", "default", "--output", str(bundle))
    )
    assert "sign a checkpoint" in exported and "export records" in exported
    imported = invoke(env, "import", str(bundle), "--tenant", "copy")
    records = json.loads(imported.stdout)["records"]
    assert f"verify {BAR}" in drawn(imported) and f"{records}/{records}" in drawn(imported)
    assert "write" in drawn(imported) and "sequence the log" in drawn(imported)
    listed = invoke(env, "impact", "--source-uri", CONTRACTOR_POLICY, "--format", "csv")
    assert next(csv.reader(io.StringIO(listed.stdout))) == list(ID_FILE_COLUMNS)
    assert "walk the blast radius" in drawn(listed)
    walked = invoke(env, "walk", "answer_1", "--format", "json")
    assert json.loads(walked.stdout)["nodes"] and "walk back and mark" in drawn(walked)
    prov = invoke(env, "export", "prov", "answer_1", "--tenant", "copy")
    assert json.loads(prov.stdout)["entity"] and "walk back" in drawn(prov)
    forgotten = invoke(env, "forget", "--source-uri", CONTRACTOR_POLICY, "--tenant", "copy")
    assert "purge captured text" in drawn(forgotten) and "append tombstones" in drawn(forgotten)

    spool = SpoolFile(isolated_data_dir / "spool", "default")
    spool.prepare()
    doc = NewContext(
        context_id="doc_spooled",
        kind="document",
        source_uri="s3://spooled",
        content_hash="sha256:" + "d" * 64,
    )
    spool.add(SpooledBatch(datetime.now(UTC), [doc]))
    replayed = invoke(env, "spool", "replay")
    assert "1 replayed" in replayed.stdout and "replay default" in drawn(replayed)

    # Off where stderr is no terminal, unless asked for.
    quiet = invoke({**env, "LINEAGE_PROGRESS": "auto"}, "export", "prov", "answer_1")
    assert BAR not in quiet.stderr and json.loads(quiet.stdout)["entity"]


def test_migrate_draws_each_step(template_db: tuple[str, str]) -> None:
    base, _ = template_db
    name = f"lineage_test_migrate_{uuid.uuid4().hex[:12]}"
    with janitor(base, name):
        env = {"LINEAGE_DATABASE_URL": url_for(base, name), "LINEAGE_PROGRESS": "always"}
        migrated = invoke({**env, "COLUMNS": "120"}, "migrate")
    steps = len(list((Path(lineage.__file__).parent / "migrations" / "versions").glob("0*.py")))
    assert re.search(rf"migrate {BAR}+ {steps}/{steps}", drawn(migrated)), drawn(migrated)
    assert migrated.stdout == "schema is at the newest revision\n"


async def test_long_listings_end_with_the_command_that_lists_everything(
    database_url: str, store: PostgresStore, tmp_path: Path
) -> None:
    manual = Derivation([], "a manual", "document", source_uri="s3://manual", context_id="manual")
    parts = [Derivation(["manual"], f"part {n}", "chunk", context_id=f"manual_part_{n}")
             for n in range(70)]  # fmt: skip
    await derive_many(store, [manual])
    await derive_many(store, parts)
    env = {"LINEAGE_DATABASE_URL": database_url}

    async def lineage(*args: str) -> str:
        result = await asyncio.to_thread(invoke, env, *args)
        return result.stdout

    def last_command(listing: str) -> list[str]:
        [more] = [line for line in listing.splitlines() if line.startswith("…")]
        return shlex.split(more.split(": ", 1)[1])

    listing = await lineage("impact", "--source-uri", "s3://manual", "--kind", "chunk")
    assert listing.count("manual_part_") == LISTED_ROWS
    assert "… 20 more: lineage impact --source-uri s3://manual --kind chunk --format csv > " \
        "impact.csv" in listing  # fmt: skip
    command = last_command(listing)
    assert command[0] == "lineage" and command[-2] == ">"
    rows = list(csv.reader(io.StringIO(await lineage(*command[1:-2]))))
    assert rows[0] == list(ID_FILE_COLUMNS) and len(rows) == 71

    forgotten = await lineage("forget", "--source-uri", "s3://manual")
    assert len(re.findall(r"^manual", forgotten, re.M)) == LISTED_ROWS
    command = last_command(forgotten)
    assert command == ["lineage", "forget", "--source-uri", "s3://manual", "--output",
                       "forgotten.json"]  # fmt: skip
    listed = tmp_path / "forgotten.json"
    again = await lineage(*command[1:-1], str(listed))
    assert f"… 21 more: every one in {listed}" in again
    assert json.loads(listed.read_text())["total"] == 71


RECORD_ID = re.compile(r"\b(?:answer|claim|summary|retrieval|chunk|doc|query)_[a-z_]*[0-9]+\b")


def test_human_output_reads_at_80_columns(database_url: str) -> None:
    env = {"LINEAGE_DATABASE_URL": database_url, "COLUMNS": "80"}
    demo = invoke(env, "demo").stdout
    walked = json.loads(invoke(env, "walk", "answer_1", "--format", "json").stdout)
    walk_ids = {node["context_id"] for node in walked["nodes"]}
    contractors = ("--source-uri", CONTRACTOR_POLICY)
    impact_ids = {
        node["context_id"]
        for line in invoke(env, "impact", *contractors, "--format", "ndjson").stdout.splitlines()
        if "context_id" in (node := json.loads(line))
    }
    shown = {
        "demo": (demo, walk_ids),
        "walk": (invoke(env, "walk", "answer_1").stdout, walk_ids),
        "impact": (invoke(env, "impact", *contractors).stdout, impact_ids),
        "freshness": (invoke(env, "freshness").stdout, {"doc_contractors_v1", "answer_1"}),
        "verify": (invoke(env, "verify", "answer_1").stdout, {"claim_1"}),
        "verify hand-off": (invoke(env, "verify", "summary_1").stdout, {"summary_1"}),
        "report claims": (invoke(env, "report", "claims").stdout, set()),
        "report drift": (invoke(env, "report", "drift").stdout, set()),
        "tenant settings": (invoke(env, "tenant", "settings", "default").stdout, set()),
        "forget": (invoke(env, "forget", *contractors).stdout, impact_ids),
    }
    for name, (text, ids) in shown.items():
        lines = text.splitlines()
        assert [line for line in lines if len(line) > 80] == [], name
        # Each record id whole on one line: none folded into a column too narrow for it.
        assert set(RECORD_ID.findall(text)) <= walk_ids | impact_ids, (name, text)
        assert ids <= set(RECORD_ID.findall(text)), (name, text)
    # Every table's header words whole; the suspicious hops said once, by the tree.
    assert "depth  kind" in shown["impact"][0] and "source / made by" in shown["impact"][0]
    assert "produced_by" in shown["report drift"][0] and "unsupported" in shown["report drift"][0]
    assert "┃" not in demo and demo.count("cross_source_merge: statement 0") == 1
