"""The progress of long commands: a rich bar per phase on stderr, never on stdout.

Drawn when stderr is a terminal, so `lineage ... --format json > out.json` keeps stdout
parseable while the bar shows; LINEAGE_PROGRESS=always draws it on any stderr (a CI log, a
test), LINEAGE_PROGRESS=never on none."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lineage.core.progress import Progress

PROGRESS_VARIABLE = "LINEAGE_PROGRESS"


@contextmanager
def progress_bar(*, transient: bool = False) -> Iterator[Progress]:
    """A callback for the work inside; each phase it names gets a bar, and one of unknown size
    is drawn full once another phase is reported or the work ends. A transient bar is erased
    at the end (a query's wait, with its answer to follow)."""
    from rich.console import Console
    from rich.progress import BarColumn, TaskID, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bars

    choice = os.environ.get(PROGRESS_VARIABLE, "auto")
    console = Console(stderr=True, force_terminal=True if choice == "always" else None)
    bars = Bars(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[count]}"),
        TimeElapsedColumn(),
        TextColumn("[dim]{task.fields[detail]}"),
        console=console,
        transient=transient,
        disable=choice == "never" or not console.is_terminal,
    )
    phases: dict[str, TaskID] = {}
    last: list[str] = []  # the phase reported last

    def finish(task: TaskID) -> None:
        if next(shown for shown in bars.tasks if shown.id == task).total is None:
            # A phase of unknown size: full once it is over.
            bars.update(task, total=1, completed=1)

    def report(phase: str, done: int = 0, total: int | None = None, detail: str = "") -> None:
        if last and last[0] != phase:
            finish(phases[last[0]])
        last[:] = [phase]
        if phase not in phases:
            phases[phase] = bars.add_task(phase, total=total, count="", detail="")
        count = f"{done:,}/{total:,}" if total is not None else f"{done:,}" if done else ""
        bars.update(phases[phase], completed=done, total=total, count=count, detail=detail)

    with bars:
        yield report
        if last:
            finish(phases[last[0]])
