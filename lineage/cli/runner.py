"""What every command shares: its options, its settings, its database and its event loop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

from lineage.cli.errors import diagnostics, reported

if TYPE_CHECKING:
    from lineage.db.database import Database
    from lineage.settings import Settings

# Data (tables, trees, JSON) goes to stdout; lineage.cli.errors.diagnostics is stderr.
console = Console()
T = TypeVar("T")

ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="A .env-style file of LINEAGE_* settings.")
]
TenantOption = Annotated[str, typer.Option("--tenant", help="The tenant whose data to use.")]
DepthOption = Annotated[
    int | None, typer.Option("--max-depth", help="Deepest level to walk (inclusive).")
]
KindOption = Annotated[
    str, typer.Option("--kind", help="A kind, 'any' (all but verdict, tombstone) or 'all'.")
]


def load(config: Path | None) -> Settings:
    """The settings of this invocation (read afresh: one process may run several commands)."""
    from lineage.settings import load_settings

    return load_settings(config)


def database_url(settings: Settings) -> str:
    """LINEAGE_DATABASE_URL, or the embedded server (started if need be, said on stderr)."""
    from lineage import db

    url = db.database_url(settings)
    if not settings.database_url:
        diagnostics.print(
            f"[dim]embedded PostgreSQL, data in {settings.data_dir / 'pgdata'} "
            "(set LINEAGE_DATABASE_URL to use another server)[/dim]",
            highlight=False,
        )
    return url


def run(
    settings: Settings,
    work: Callable[[Database], Awaitable[T]],
    *,
    as_owner: bool = False,
    url: str | None = None,
) -> T:
    """Open this invocation's one Database (its pool, the keyring its settings name), do the
    work, close it; errors a user can act on become one red line. While it works, a wait for
    a lock is said on stderr (lineage.cli.waits)."""
    import asyncio

    import click

    from lineage.cli.progress import interval_s
    from lineage.cli.waits import application_name, named, watch_lock_waits
    from lineage.db.database import Database

    context, names = click.get_current_context(silent=True), []
    while context is not None and context.parent is not None:  # up to, not with, the program
        names.append(context.info_name or "")
        context = context.parent
    command = " ".join(reversed(names)) or "command"

    async def main() -> T:
        target = url or database_url(settings)
        name = application_name(command)
        database = await Database.connect(
            settings, named(target, name), max_size=2, as_owner=as_owner
        )
        watcher = asyncio.create_task(
            watch_lock_waits(target, name, _say, interval_s()), name="lock waits"
        )
        try:
            return await work(database)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            await database.close()

    return traced(main)


def _say(line: str) -> None:
    diagnostics.print(line, highlight=False, markup=False, soft_wrap=True)


def traced(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run `main` under one trace id: the records it makes carry it, and so does its error line."""
    import asyncio

    from lineage.core import telemetry

    with telemetry.trace_context() as trace_id, reported(trace_id=trace_id):
        return asyncio.run(main())
