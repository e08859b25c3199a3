"""The one place the CLI reports an error: a red line on stderr and an exit status."""

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape

from lineage.core.errors import LineageError

# Diagnostics (errors, warnings, banners) go to stderr so that stdout stays parseable.
diagnostics = Console(stderr=True)


def fail(message: str, code: int = 1, *, trace_id: str | None = None) -> typer.Exit:
    """Print `error: message` on stderr; raise what this returns to end the command."""
    traced = f" [dim](trace_id {trace_id})[/dim]" if trace_id else ""
    diagnostics.print(f"[red]error:[/red] {escape(message)}{traced}", highlight=False)
    return typer.Exit(code)


@contextmanager
def reported(code: int = 1, *, trace_id: str | None = None) -> Iterator[None]:
    """A LineageError raised inside becomes one error line and exit status `code`."""
    try:
        yield
    except LineageError as exc:
        raise fail(str(exc), code, trace_id=trace_id) from exc


def exactly_one(**options: object) -> tuple[str, object]:
    """The one option given of several alternatives, or exit 2 naming them all."""
    given = [(name, value) for name, value in options.items() if value is not None]
    if len(given) != 1:
        names = ", ".join("--" + name.replace("_", "-") for name in options)
        raise fail(f"give exactly one of {names}", 2)
    return given[0]
