"""The command line on a terminal: help that wraps where the terminal ends, not where the source
did; output that reads at 80 columns; long listings summarised; progress on stderr only."""

from typer.main import get_command
from typer.testing import CliRunner

from lineage.cli import app


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
