"""`lineage forget`: the right to be forgotten, from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from lineage.cli.progress import progress_bar
from lineage.cli.render import LISTED_ROWS, command_line, print_more, table
from lineage.cli.runner import ConfigOption, DepthOption, TenantOption, console, load, run
from lineage.core import DEFAULT_TENANT


def forget_source(
    ctx: typer.Context,
    source_uri: Annotated[
        str, typer.Option("--source-uri", help="The source_uri exactly as it was recorded.")
    ],
    tenant: TenantOption = DEFAULT_TENANT,
    max_depth: DepthOption = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", help="Write every affected id and kind (JSON) to this file."),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="List what would go, from lineage and each vector store; change nothing.",
        ),
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Right to be forgotten: list everything derived from a source for the downstream stores,
    delete the vectors of its chunks and embeddings from each registered vector store, purge
    its captured text and append tombstones; provenance stays. Refuses, writing nothing, if
    --max-depth cuts the walk short. Exits 1 if a vector store failed: run it again."""
    from lineage.services.auth import Caller
    from lineage.services.forget import forget

    settings = load(config)
    caller = Caller(tenant, None, "admin")
    with progress_bar() as progress:
        forgotten = run(
            settings,
            lambda database: forget(
                database,
                settings,
                caller,
                source_uri,
                max_depth,
                dry_run=dry_run,
                progress=progress,
            ),
        )
    listed = table("context_id", "kind", "depth", title=f"blast radius of {source_uri}", numbers=1)
    for node in forgotten.affected[:LISTED_ROWS]:
        listed.add_row(node["context_id"], node["kind"], str(node["depth"]))
    console.print(listed)
    total = len(forgotten.affected)
    if output is not None:
        print_more(LISTED_ROWS, total, f"every one in {output}")
    else:  # run again, it has nothing left to purge and lists them all
        print_more(LISTED_ROWS, total, command_line(ctx, output="forgotten.json"))
    if output is not None:
        output.write_text(json.dumps(forgotten.model_dump(mode="json"), indent=2) + "\n")
        console.print(f"wrote {len(forgotten.affected)} ids to {output}")
    if forgotten.vector_stores:
        stores = table(
            "store", "target", "status", "ids found", "remaining", title="vector stores", numbers=2
        )
        for receipt in forgotten.vector_stores:
            left = "-" if receipt.remaining is None else str(len(receipt.remaining))
            status = receipt.status + (f": {receipt.error}" if receipt.error else "")
            stores.add_row(receipt.store, receipt.target, status, str(len(receipt.found)), left)
        console.print(stores)
    console.print(forgotten.summary, highlight=False)
    if not forgotten.complete:
        raise typer.Exit(1)
