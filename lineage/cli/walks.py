"""Walks from the command line: walk (back to the sources), impact (blast radius), freshness."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from lineage.cli import render
from lineage.cli.errors import exactly_one, fail
from lineage.cli.progress import progress_bar
from lineage.cli.runner import (
    ConfigOption,
    DepthOption,
    KindOption,
    TenantOption,
    load,
    run,
)
from lineage.core import DEFAULT_TENANT

if TYPE_CHECKING:
    from pathlib import Path

    from lineage.db.database import Database
    from lineage.services.walks import Walk

WALK_FORMATS = ("tree", "json", "dot")
NODE_FORMATS = ("table", "ndjson", "csv")
NodeFormatOption = Annotated[
    str, typer.Option("--format", help="table (the first rows), ndjson or csv (every row).")
]


def _check_format(output: str, formats: tuple[str, ...]) -> None:
    if output not in formats:
        raise fail(f"--format must be one of {', '.join(formats)}", 2)


def walk(
    context_id: Annotated[str, typer.Argument(help="The context to walk back from.")],
    output: Annotated[
        str, typer.Option("--format", help="tree (readable), json, or dot (Graphviz).")
    ] = "tree",
    max_depth: DepthOption = None,
    layers: Annotated[
        bool,
        typer.Option(
            "--layers",
            help="Show each hop's request, service call (provider, model, parameters) and "
            "transport (backend request id), read from the stored spans of its trace.",
        ),
    ] = False,
    tenant: TenantOption = DEFAULT_TENANT,
    config: ConfigOption = None,
) -> None:
    """Walk a context back to its sources, suspicious hops marked."""
    from lineage.services import walks

    _check_format(output, WALK_FORMATS)
    settings = load(config)

    async def work(database: Database) -> tuple[Walk, list[dict[str, Any]]]:
        return await walks.marked_walk_back(
            database, settings, tenant, context_id, max_depth, layers=layers
        )

    with progress_bar(transient=True) as progress:
        progress("walk back and mark")
        found, hops = run(settings, work)
    if output == "json":
        print(render.walk_json(found, hops))
    elif output == "dot":
        print(render.walk_dot(found, hops))
    else:
        render.print_walk(found, hops)
        render.print_hops(hops)


def impact(
    ctx: typer.Context,
    source_uri: Annotated[str | None, typer.Option(help="A document's source URI.")] = None,
    transform_version: Annotated[
        str | None, typer.Option(help="e.g. chunker@1.4: what depends on its output.")
    ] = None,
    index_snapshot: Annotated[str | None, typer.Option(help="An index snapshot id.")] = None,
    embedding_model: Annotated[
        str | None, typer.Option(help="What depends on the chunks this model embedded.")
    ] = None,
    context_id: Annotated[str | None, typer.Option(help="One context's blast radius.")] = None,
    kind: KindOption = "any",
    max_depth: DepthOption = None,
    output: NodeFormatOption = "table",
    tenant: TenantOption = DEFAULT_TENANT,
    config: ConfigOption = None,
) -> None:
    """Blast radius: everything derived from a document, transform version, snapshot, embedding
    model or id."""
    name, value = exactly_one(
        source_uri=source_uri,
        transform_version=transform_version,
        index_snapshot=index_snapshot,
        embedding_model=embedding_model,
        context_id=context_id,
    )
    if name == "context_id":
        name, value = "context_ids", [value]
    _print_walked_nodes(
        ctx, name, {name: value}, "walk the blast radius",
        kind=kind, max_depth=max_depth, output=output, tenant=tenant, config=config,
    )  # fmt: skip


def freshness(
    ctx: typer.Context,
    source_uri: Annotated[str, typer.Option(help="One document, or 'any'.")] = "any",
    kind: KindOption = "any",
    max_depth: DepthOption = None,
    output: NodeFormatOption = "table",
    tenant: TenantOption = DEFAULT_TENANT,
    config: ConfigOption = None,
) -> None:
    """Records derived from a document revision that is no longer the newest."""
    _print_walked_nodes(
        ctx, "stale", {"source_uri": source_uri}, "walk from the superseded revisions",
        kind=kind, max_depth=max_depth, output=output, tenant=tenant, config=config,
    )  # fmt: skip


def _print_walked_nodes(
    ctx: typer.Context,
    question: str,
    start: dict[str, Any],
    step: str,
    *,
    kind: str,
    max_depth: int | None,
    output: str,
    tenant: str,
    config: Path | None,
) -> None:
    """Run a walk that lists records (an impact `question`, from the records `start` picks)
    with the options impact and freshness share, and print its rows in the chosen format."""
    from lineage.services import walks

    _check_format(output, NODE_FORMATS)
    settings = load(config)

    async def work(database: Database) -> list[dict[str, Any]]:
        return await walks.impact_nodes(
            database,
            settings,
            question,
            tenant_id=tenant,
            kind=walks.check_kind(kind),
            max_depth=walks.check_depth(settings, max_depth),
            **start,
        )

    with progress_bar(transient=True) as progress:
        progress(step)
        nodes = run(settings, work)
    render.print_nodes(nodes, output, ctx)
