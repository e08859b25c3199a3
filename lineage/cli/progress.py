"""The progress of long commands on stderr, never on stdout: a rich bar per phase when stderr
is a terminal, else a line every LINEAGE_PROGRESS_INTERVAL seconds (10 by default) for a log
that nobody watches live (cron, CI, a container), with the count, the rate and the time left.

So `lineage ... --format json > out.json` keeps stdout parseable either way;
LINEAGE_PROGRESS=always draws bars on any stderr, LINEAGE_PROGRESS=never prints nothing."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lineage.core.progress import Progress

PROGRESS_VARIABLE = "LINEAGE_PROGRESS"
INTERVAL_VARIABLE = "LINEAGE_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 10.0


def interval_s() -> float:
    """Seconds between two progress lines (and between two reports of a lock wait)."""
    try:
        return max(0.0, float(os.environ.get(INTERVAL_VARIABLE, DEFAULT_INTERVAL_S)))
    except ValueError:
        return DEFAULT_INTERVAL_S


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class ProgressLines:
    """Progress as lines of text: a phase's first report at once (`quiet`: only once it has
    lasted `every_s`, for quick work that usually ends first), then at most one line every
    `every_s` seconds, and a closing line with how long the phase took."""

    def __init__(
        self,
        write: Callable[[str], None],
        every_s: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        quiet: bool = False,
    ) -> None:
        self.write = write
        self.every_s = every_s
        self.clock = clock
        self.quiet = quiet
        self.shown = False  # a line of this phase was written
        self.phase: str | None = None
        self.started = self.printed = 0.0
        self.done, self.detail = 0, ""
        self.total: int | None = None
        # What the last line said: a report that adds nothing to it is not written.
        self.said: tuple[str | None, int, int | None, str] = (None, 0, None, "")

    def __call__(
        self, phase: str, done: int = 0, total: int | None = None, detail: str = ""
    ) -> None:
        now = self.clock()
        if phase != self.phase:
            self.close()
            self.phase, self.started, self.shown = phase, now, False
            self.printed = now if self.quiet else now - self.every_s
        if now - self.printed < self.every_s:
            self.done, self.total, self.detail = done, total, detail
            return
        if (phase, done, total, detail) == self.said:
            return  # nothing new since the last line
        self.done, self.total, self.detail = done, total, detail
        self.say(self.line(now))
        self.printed = now

    def line(self, now: float) -> str:
        parts = [f"{self.phase}"]
        if self.total is not None:
            share = f" ({self.done / self.total:.0%})" if self.total else ""
            parts.append(f"{self.done:,} of {self.total:,}{share}")
        elif self.done:
            parts.append(f"{self.done:,}")
        took = now - self.started
        if self.done and took > 0:
            rate = self.done / took
            parts.append(f"{rate:,.0f}/s")
            left = (self.total - self.done) / rate if self.total is not None else 0
            if left >= 1:
                parts.append(f"about {duration(left)} left")
        if self.detail:
            parts.append(self.detail)
        return " · ".join(parts)

    def say(self, line: str) -> None:
        self.write(f"lineage: {line}")
        self.said = (self.phase, self.done, self.total, self.detail)
        self.shown = True

    def close(self) -> None:
        """The current phase is over: how far it got and how long it took (if it said it was
        under way)."""
        if self.phase is None or not self.shown:
            self.phase = None
            return
        took = self.clock() - self.started
        count = f"{self.done:,}" if self.total is None else f"{self.done:,} of {self.total:,}"
        self.write(f"lineage: {self.phase} · done" + (f", {count}" if self.done else "") +
                   f" in {duration(took)}")  # fmt: skip
        self.phase = None
        self.said = (None, 0, None, "")


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextmanager
def progress_bar(*, transient: bool = False) -> Iterator[Progress]:
    """A callback for the work inside. On a terminal each phase it names gets a bar, and one of
    unknown size is drawn full once another phase is reported or the work ends; a transient bar
    is erased at the end (a query's wait, with its answer to follow). Elsewhere it prints
    ProgressLines."""
    from rich.console import Console
    from rich.progress import BarColumn, TaskID, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bars

    choice = os.environ.get(PROGRESS_VARIABLE, "auto")
    console = Console(stderr=True, force_terminal=True if choice == "always" else None)
    if choice != "never" and not console.is_terminal:
        lines = ProgressLines(_stderr_line, interval_s(), quiet=transient)
        yield lines
        lines.close()
        return
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
