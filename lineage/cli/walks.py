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

if TYPE_CHECKING:
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
    tenant: TenantOption = "default",
    config: ConfigOption = None,
) -> None:
    """Walk a context back to its sources, suspicious hops marked."""
    from lineage.services import walks

    _check_format(output, WALK_FORMATS)
    settings = load(config)

    async def work(database: Database) -> tuple[Walk, list[dict[str, Any]]]:
        found = await walks.walk_back(database, settings, tenant, context_id, max_depth)
        hops = await walks.suspicious_hops(database, settings, tenant, context_id, max_depth)
        return found, hops

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
    context_id: Annotated[str | None, typer.Option(help="One context's blast radius.")] = None,
    kind: KindOption = "any",
    max_depth: DepthOption = None,
    output: NodeFormatOption = "table",
    tenant: TenantOption = "default",
    config: ConfigOption = None,
) -> None:
    """Blast radius: everything derived from a document, transform version, snapshot or id."""
    from lineage.services import walks

    name, value = exactly_one(
        source_uri=source_uri,
        transform_version=transform_version,
        index_snapshot=index_snapshot,
        context_id=context_id,
    )
    if name == "context_id":
        name, value = "context_ids", [value]
    _check_format(output, NODE_FORMATS)
    settings = load(config)

    async def work(database: Database) -> list[dict[str, Any]]:
        return await walks.run(
            database,
            settings,
            walks.IMPACT_QUERIES[name],
            tenant_id=tenant,
            kind=walks.check_kind(kind),
            max_depth=walks.check_depth(settings, max_depth),
            **{name: value},
        )

    with progress_bar(transient=True) as progress:
        progress("walk the blast radius")
        nodes = run(settings, work)
    render.print_nodes(nodes, output, ctx)


def freshness(
    ctx: typer.Context,
    source_uri: Annotated[str, typer.Option(help="One document, or 'any'.")] = "any",
    kind: KindOption = "any",
    max_depth: DepthOption = None,
    output: NodeFormatOption = "table",
    tenant: TenantOption = "default",
    config: ConfigOption = None,
) -> None:
    """Records derived from a document revision that is no longer the newest."""
    from lineage.services import walks

    _check_format(output, NODE_FORMATS)
    settings = load(config)

    async def work(database: Database) -> list[dict[str, Any]]:
        return await walks.run(
            database,
            settings,
            "stale_sources",
            tenant_id=tenant,
            source_uri=source_uri,
            kind=walks.check_kind(kind),
            max_depth=walks.check_depth(settings, max_depth),
        )

    with progress_bar(transient=True) as progress:
        progress("walk from the superseded revisions")
        nodes = run(settings, work)
    render.print_nodes(nodes, output, ctx)
