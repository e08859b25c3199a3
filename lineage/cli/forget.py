"""`lineage forget`: the right to be forgotten, from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from lineage.cli.errors import reported
from lineage.cli.runner import ConfigOption, DepthOption, TenantOption, console, load, run

# Rows of affected ids the terminal shows; --output holds them all.
FORGET_ROWS_SHOWN = 100


def forget_source(
    source_uri: Annotated[
        str, typer.Option("--source-uri", help="The source_uri exactly as it was recorded.")
    ],
    tenant: TenantOption = "default",
    max_depth: DepthOption = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", help="Write every affected id and kind (JSON) to this file."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Right to be forgotten: list everything derived from a source for the downstream stores,
    purge its captured text and append tombstones, in one transaction; provenance stays.
    Refuses, writing nothing, if --max-depth cuts the walk short."""
    from lineage.services.auth import Caller
    from lineage.services.forget import forget
    from lineage.services.signing import signer_for

    settings = load(config)
    caller = Caller(tenant, None, "admin")
    with reported():
        signer = signer_for(settings)  # this invocation's keyring, from --config
    forgotten = run(
        settings,
        lambda pool: forget(pool, settings, caller, source_uri, max_depth, signer=signer),
    )
    table = Table("context_id", "kind", "depth", title=f"blast radius of {source_uri}")
    for node in forgotten.affected[:FORGET_ROWS_SHOWN]:
        table.add_row(node["context_id"], node["kind"], str(node["depth"]))
    console.print(table)
    hidden = len(forgotten.affected) - FORGET_ROWS_SHOWN
    if hidden > 0:
        console.print(f"… and {hidden} more" + ("" if output else ": pass --output FILE"))
    if output is not None:
        output.write_text(json.dumps(forgotten.as_dict(), indent=2) + "\n")
        console.print(f"wrote {len(forgotten.affected)} ids to {output}")
    console.print(forgotten.summary(), highlight=False)
