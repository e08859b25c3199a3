"""Retention by time: the period (the owner's), and expiring the months past it."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from lineage.cli.errors import diagnostics
from lineage.cli.runner import ConfigOption, console, load, run

retention_app = typer.Typer(
    help="Retention by time: records older than the period are dropped a month at a time."
)


@retention_app.command("show")
def retention_show(config: ConfigOption = None) -> None:
    """The retention period and the partitions of provenance kept (as the database owner)."""
    from lineage.services import retention

    policy = run(load(config), retention.get_policy, as_owner=True)
    kept = policy["keep_months"]
    console.print(
        f"records kept {'for ever' if kept is None else f'at least {kept} months'}; "
        f"{len(policy['partitions'])} partitions of provenance: " + ", ".join(policy["partitions"]),
        highlight=False,
    )


@retention_app.command("set")
def retention_set(
    keep_months: Annotated[
        int, typer.Argument(help="Months to keep every tenant's records; 0 keeps them all.")
    ],
    config: ConfigOption = None,
) -> None:
    """Set the retention period for every tenant (as the database owner); audited. Nothing is
    dropped until `lineage retention apply` or the service's hourly round; what is stored when
    a period is first set expires whole, once its newest month is past the period."""
    from lineage.services import retention

    kept = run(
        load(config), lambda database: retention.set_policy(database, keep_months), as_owner=True
    )
    console.print(
        "records kept for ever" if kept is None else f"records kept at least {kept} months"
    )


@retention_app.command("apply")
def retention_apply(config: ConfigOption = None) -> None:
    """Drop every month partition wholly older than the period (forget tombstones kept,
    captured text purged, the log's leaves and checkpoints kept); add the months ahead. Prints
    the receipt written to the operator's audit trail."""
    from lineage.services import retention

    receipt = run(load(config), retention.apply, as_owner=True)
    print(json.dumps(receipt, indent=2, default=str))
    dropped = receipt["months_dropped"]
    diagnostics.print(
        f"expired {len(dropped)} months"
        + (": " + ", ".join(month["month"] for month in dropped) if dropped else "")
        + "; the receipt is in the operator's audit trail (`lineage audit operator`)",
        highlight=False,
    )
