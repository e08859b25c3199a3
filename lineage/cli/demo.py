"""`lineage demo`: load the demo incident and walk its wrong answer back to the causes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lineage.cli import render
from lineage.cli.errors import diagnostics
from lineage.cli.runner import ConfigOption, TenantOption, console, database_url, load, run
from lineage.core import DEFAULT_TENANT

if TYPE_CHECKING:
    from lineage.db.database import Database
    from lineage.services.walks import Walk


def demo(tenant: TenantOption = DEFAULT_TENANT, config: ConfigOption = None) -> None:
    """Load the demo incident (idempotent), walk its wrong answer back to both root causes."""
    from lineage.db.migrate import migrate as upgrade
    from lineage.services.demo import (
        ANSWER_ID,
        CORRECT_ANSWER,
        SUMMARY_ID,
        load_incident,
        story,
    )
    from lineage.store.postgres import PostgresStore

    settings = load(config)
    url = database_url(settings)
    upgrade(url)

    async def work(database: Database) -> tuple[Walk, list[dict[str, Any]], list[str]]:
        contexts = await load_incident(PostgresStore(database, tenant))
        diagnostics.print(f"loaded {len(contexts)} demo records (tenant {tenant})")
        return await story(database, settings, tenant)

    walk, hops, lines = run(settings, work, url=url)
    console.print(
        f'\nQ: "What notice period do contractors get?"  A: "30 days" (answer id {ANSWER_ID}): '
        f"wrong; the revised contractor policy says {CORRECT_ANSWER}.\n"
        f"The walk back, four hops from the answer to the stale document:\n"
    )
    render.print_walk(walk, hops)
    render.print_hops(hops)
    render.print_lines(lines)
    console.print(
        f"\nNext: [bold]lineage serve[/bold], then open "
        f"http://{settings.host}:{settings.port}/ui and paste {ANSWER_ID} "
        f"(API docs at http://{settings.host}:{settings.port}/docs); "
        f"or [bold]lineage walk {ANSWER_ID}[/bold], [bold]lineage verify {SUMMARY_ID}[/bold]."
    )
