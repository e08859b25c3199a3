"""What a benchmark run found: figures with their targets and ratios, as one rich table and as
bench/RESULTS.md."""

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.table import Table


def percentile(values: Sequence[float], fraction: float) -> float:
    if not values:
        return math.nan
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[round(fraction * 1000) - 1]


@dataclass
class Figure:
    group: str
    name: str
    unit: str  # ms, records/s, s, MB, ms/10k answers
    value: float  # the p50 for timed samples
    p99: float | None = None
    samples: int = 1
    target: str = ""
    met: bool | None = None  # None: no target, or not comparable at this size
    versus: str = ""  # ratios to the baselines
    note: str = ""

    @classmethod
    def timed(
        cls, group: str, name: str, samples_ms: Sequence[float], **kwargs: object
    ) -> "Figure":
        return cls(
            group,
            name,
            "ms",
            percentile(samples_ms, 0.5),
            percentile(samples_ms, 0.99),
            len(samples_ms),
            **kwargs,  # type: ignore[arg-type]
        )

    def shown(self) -> str:
        value = _number(self.value)
        if self.p99 is None:
            return f"{value} {self.unit}"
        return f"p50 {value} / p99 {_number(self.p99)} {self.unit}"

    def verdict(self) -> str:
        return {True: "met", False: "MISSED", None: ""}[self.met]


def _number(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def ratio(ours: float, theirs: float, what: str) -> str:
    """'4.2x faster than what' (or slower), comparing times."""
    if not ours or not theirs or math.isnan(ours) or math.isnan(theirs):
        return ""
    if theirs >= ours:
        return f"{theirs / ours:.1f}x faster than {what}"
    return f"{ours / theirs:.1f}x slower than {what}"


@dataclass
class Report:
    title: str
    context: dict[str, str]  # machine, PostgreSQL, date, size, features...
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, figure: Figure) -> Figure:
        self.figures.append(figure)
        return figure

    def table(self) -> Table:
        table = Table(title=self.title, show_lines=False)
        for column in ("group", "figure", "measured", "target", "", "versus baselines"):
            table.add_column(column, overflow="fold")
        for figure in self.figures:
            style = "red" if figure.met is False else None
            table.add_row(
                figure.group,
                figure.name,
                figure.shown(),
                figure.target,
                figure.verdict(),
                figure.versus,
                style=style,
            )
        return table

    def markdown(self) -> str:
        lines = [f"# {self.title}", ""]
        lines += [f"- **{key}**: {value}" for key, value in self.context.items()]
        lines += [
            "",
            "| group | figure | measured | samples | target | | versus baselines | note |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for f in self.figures:
            cells = (f.group, f.name, f.shown(), str(f.samples), f.target, f.verdict(), f.versus)
            lines.append("| " + " | ".join((*cells, f.note)).replace("\n", " ") + " |")
        if self.notes:
            lines += ["", "## Notes", ""]
            lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines) + "\n"
