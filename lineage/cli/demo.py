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
        DEMO_TEXTS,
        SUMMARY_ID,
        keep_texts,
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
        if turned_on := await keep_texts(database, tenant):
            off = " ".join(f"--no-{switch.replace('_', '-')}" for switch in turned_on)
            diagnostics.print(
                f"turned on {', '.join(turned_on)} for tenant {tenant} and captured the texts "
                f"of {', '.join(DEMO_TEXTS)}, so that `lineage verify` judges them as the demo "
                f"does; `lineage tenant settings {tenant} {off}` turns capture off again"
            )
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
    on = "" if tenant == DEFAULT_TENANT else f" --tenant {tenant}"
    address = f"http://{settings.host}:{settings.port}"
    suggested = {
        f"lineage walk {ANSWER_ID}{on}": "the walk back and its marks",
        f"lineage verify {ANSWER_ID}{on}": "the claim check",
        f"lineage verify {SUMMARY_ID}{on}": "the hand-off check",
        f"lineage freshness{on}": "the records made from a superseded revision",
        "lineage serve": f"then open {address}/ui, paste {ANSWER_ID} (API: {address}/docs)",
    }
    width = max(map(len, suggested)) + 2
    console.print("\nNext, each shows again a part of the above:")
    for command, what in suggested.items():
        console.print(
            f"  [bold]{command}[/bold]{' ' * (width - len(command))}{what}", highlight=False
        )
