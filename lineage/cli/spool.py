"""`lineage spool`: records kept locally while the store was down; see them, send them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from lineage.cli import render
from lineage.cli.errors import fail
from lineage.cli.progress import progress_bar
from lineage.cli.runner import ConfigOption, console, load, run

if TYPE_CHECKING:
    from lineage.core.progress import Progress
    from lineage.db.database import Database
    from lineage.store.spool import Replay

spool_app = typer.Typer(
    help="Records kept locally while the store was down: see them, send them.",
    no_args_is_help=True,
)


@spool_app.command("status")
def spool_status(config: ConfigOption = None) -> None:
    """Records waiting in the local spool, per tenant, and batches the store refused."""
    from lineage.store.spool import SpoolFile, spool_dir, spooled_tenants

    directory = spool_dir(load(config))
    tenants = spooled_tenants(directory)
    if not tenants:
        console.print(f"nothing spooled in {directory}")
        return
    table = render.table(
        "tenant", "batches", "records", "oldest", "rejected batches", title=f"spool in {directory}"
    )
    for tenant in tenants:
        status = SpoolFile(directory, tenant).status()
        oldest = status.oldest.isoformat(timespec="seconds") if status.oldest else ""
        table.add_row(
            tenant,
            str(status.batches),
            str(status.records),
            oldest,
            str(status.rejected_batches),
        )
    console.print(table)


@spool_app.command("replay")
def spool_replay(
    tenant: Annotated[
        str | None, typer.Option(help="Only this tenant's spool; default every one.")
    ] = None,
    api_url: Annotated[
        str | None, typer.Option(help="Send through this lineage API, not to the database.")
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="LINEAGE_API_KEY", help="Ingest key for --api-url.")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Send spooled records to the store, oldest first; ones it already holds are no-ops."""
    from lineage.db.errors import OUTAGE_ERRORS
    from lineage.store import HttpStore, PostgresStore
    from lineage.store.spool import SpoolingStore, spool_dir, spooled_tenants

    settings = load(config)
    directory = spool_dir(settings)
    tenants = [tenant] if tenant else spooled_tenants(directory)
    if api_url and len(tenants) > 1:
        raise fail("an API key belongs to one tenant: give --tenant", 2)

    async def through_api(progress: Progress) -> dict[str, Replay]:
        replays = {}
        for name in tenants:
            http = HttpStore(str(api_url), name, api_key)
            try:
                replays[name] = await SpoolingStore(http, directory).replay(progress)
            finally:
                await http.aclose()
        return replays

    async def to_database(database: Database, progress: Progress) -> dict[str, Replay]:
        return {
            name: await SpoolingStore(PostgresStore(database, name), directory).replay(progress)
            for name in tenants
        }

    import asyncio

    try:
        with progress_bar() as progress:
            if api_url:
                replays = asyncio.run(through_api(progress))
            else:
                replays = run(settings, lambda database: to_database(database, progress))
    except OUTAGE_ERRORS as exc:
        raise fail(f"the database is unavailable ({exc}); nothing replayed") from exc
    for name, replay in replays.items():
        waiting = f", {replay.remaining} still waiting ({replay.error})" if replay.remaining else ""
        console.print(
            f"tenant {name}: {replay.replayed} replayed, {replay.rejected} rejected{waiting}"
        )
    if any(replay.remaining for replay in replays.values()):
        raise typer.Exit(1)
