"""Claims: judge an answer's claims (`verify`) and report failing claim rates (`report`)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from lineage.cli import render
from lineage.cli.runner import ConfigOption, TenantOption, console, load, run
from lineage.core import DEFAULT_TENANT

report_app = typer.Typer(help="Reports over recorded verdicts.", no_args_is_help=True)


def verify(
    context_id: Annotated[
        str,
        typer.Argument(
            help="An answer (all its claims), a claim, or a summary, reasoning, plan "
            "or tool_call (each statement against its parents)."
        ),
    ],
    output: Annotated[str, typer.Option("--format", help="text or json.")] = "text",
    tenant: TenantOption = DEFAULT_TENANT,
    config: ConfigOption = None,
) -> None:
    """Judge an LLM-made record against its sources (texts from context_text); appends verdicts."""
    from lineage.claims.handoffs import verify_command
    from lineage.claims.judges import judge_from_settings

    settings = load(config)
    result = run(
        settings,
        # LINEAGE_CLAIM_JUDGE: offline, openai or a plug-in (named errors come from run)
        lambda database: verify_command(
            database, tenant, context_id, judge_from_settings(settings)
        ),
    )
    if output == "json":
        print(json.dumps(result.as_dict(), indent=2))
        return
    render.print_lines(result.lines())


@report_app.command("claims")
def report_claims(
    since: Annotated[
        str | None, typer.Option(help="ISO date or time; default 30 days ago.")
    ] = None,
    bucket: Annotated[str, typer.Option(help="'1 hour', '1 day', '7 days'...")] = "1 day",
    group_by: Annotated[str, typer.Option("--group-by", help="produced_by.")] = "produced_by",
    output: Annotated[str, typer.Option("--format", help="table or ndjson.")] = "table",
    tenant: TenantOption = DEFAULT_TENANT,
    config: ConfigOption = None,
) -> None:
    """Failing claim rates (uncited, hallucinated_id, unsupported) per bucket and produced_by."""
    from lineage.claims.verify import claims_report, report_table

    settings = load(config)
    rows = run(
        settings,
        lambda database: claims_report(database, settings, tenant, since, bucket, group_by),
    )
    if output == "ndjson":
        for row in rows:
            print(json.dumps(row))
        return
    if not rows:
        console.print("no verified claims in this window")
        return
    render.print_table(*report_table(rows), numbers=3)


@report_app.command("drift")
def report_drift(
    since: Annotated[
        str | None, typer.Option(help="ISO date or time; default 30 days ago.")
    ] = None,
    bucket: Annotated[str, typer.Option(help="'1 day', '7 days'...")] = "1 day",
    output: Annotated[str, typer.Option("--format", help="table or ndjson.")] = "table",
    tenant: TenantOption = DEFAULT_TENANT,
    config: ConfigOption = None,
) -> None:
    """Unsupported and merged rates per bucket and produced_by, with the change since the last."""
    from lineage.claims.drift import drift_report, drift_table

    settings = load(config)
    rows = run(settings, lambda database: drift_report(database, settings, tenant, since, bucket))
    if output == "ndjson":
        for row in rows:
            print(json.dumps(row))
        return
    if not rows:
        console.print("nothing verified in this window")
        return
    render.print_table(*drift_table(rows), numbers=3)
    console.print("[dim]rates, each with its change since the bucket before[/dim]")
