"""docs/cli.md is the CLI's help, generated from the typer app, and every command has help.

The reference is what `typer ... utils docs` makes of `lineage.cli:app`; a help string changed
in the code fails here, with the diff and the command that regenerates the page.
"""

import difflib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from typer.main import get_command

from lineage.cli import app

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "cli.md"
GENERATE = ("-m", "typer", "lineage.cli", "utils", "docs", "--name", "lineage", "--output")
REGENERATE = f"python {' '.join(GENERATE)} docs/cli.md"

# Parameters that have no help text yet: write theirs in lineage/cli/ and strike them here.
PARAMETERS_WITHOUT_HELP = {
    "lineage audit operator --limit",
    "lineage key revoke KEY_ID",
    "lineage tenant create NAME",
    "lineage tenant token NAME",
}


def test_the_cli_reference_is_generated_from_the_app(tmp_path: Path) -> None:
    generated = tmp_path / "cli.md"
    subprocess.run(
        [sys.executable, *GENERATE, str(generated)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=120,
    )
    want, have = generated.read_text(), REFERENCE.read_text() if REFERENCE.exists() else ""
    diff = "".join(
        difflib.unified_diff(
            have.splitlines(keepends=True),
            want.splitlines(keepends=True),
            "docs/cli.md (committed)",
            "docs/cli.md (from lineage.cli:app)",
        )
    )
    assert not diff, (
        f"docs/cli.md differs from the CLI's help; regenerate it:\n\n    {REGENERATE}\n\n{diff}"
    )


def commands(command: Any, path: str = "lineage") -> Iterator[tuple[str, Any]]:
    """Every command and group under `command`, at any depth, by its full name."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from commands(sub, f"{path} {name}")


def test_every_command_and_group_has_help_text() -> None:
    found = dict(commands(get_command(app)))
    assert {"lineage sql list", "lineage log verify", "lineage key create"} <= set(found)
    silent = sorted(path for path, command in found.items() if not (command.help or "").strip())
    assert silent == [], f"commands without help text: {silent}"


def shown(parameter: Any) -> str:
    """An option by its longest flag, an argument by its metavar-like name."""
    if parameter.param_type_name == "option":
        return str(max(parameter.opts, key=len))
    return str(parameter.name).upper()


def test_every_parameter_has_help_text() -> None:
    silent = {
        f"{path} {shown(parameter)}"
        for path, command in commands(get_command(app))
        for parameter in command.params
        if not (getattr(parameter, "help", None) or "").strip()
    }
    assert silent == PARAMETERS_WITHOUT_HELP, (
        f"give these help text: {sorted(silent - PARAMETERS_WITHOUT_HELP)}; "
        f"strike these from PARAMETERS_WITHOUT_HELP: {sorted(PARAMETERS_WITHOUT_HELP - silent)}"
    )
