"""The `lineage` command: serve, migrate, demo, walk, impact, freshness, sql."""

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import asyncpg
import typer
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from lineage import db, walks
from lineage.errors import LineageError
from lineage.queries import QUERIES
from lineage.settings import Settings, load_settings

app = typer.Typer(help="Lineage for RAG and multi-agent pipelines.", no_args_is_help=True)
sql_app = typer.Typer(help="The named queries in sql/: print them, run them.", no_args_is_help=True)
app.add_typer(sql_app, name="sql")
report_app = typer.Typer(help="Reports over recorded verdicts.", no_args_is_help=True)
app.add_typer(report_app, name="report")
console = Console()
T = TypeVar("T")

ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="A .env-style file of LINEAGE_* settings.")
]
DepthOption = Annotated[
    int | None, typer.Option("--max-depth", help="Deepest level to walk (inclusive).")
]
KindOption = Annotated[
    str, typer.Option("--kind", help="A kind, 'any' (all but verdict, tombstone) or 'all'.")
]


@functools.cache
def _settings(config: Path | None) -> Settings:
    return load_settings(config)


_urls: dict[tuple[str | None, Path], str] = {}


def _url(settings: Settings) -> str:
    """Resolve (and for the embedded server, start) the database once per process."""
    key = (settings.database_url, settings.data_dir)
    if key not in _urls:
        _urls[key] = db.database_url(settings)
        if not settings.database_url:
            console.print(
                f"[dim]embedded PostgreSQL, data in {settings.data_dir / 'pgdata'} "
                "(set LINEAGE_DATABASE_URL to use another server)[/dim]"
            )
    return _urls[key]


def _run(settings: Settings, work: Callable[[asyncpg.Pool], Awaitable[T]]) -> T:
    """Open a pool, do the work, close it; errors a user can act on become one red line."""

    async def main() -> T:
        pool = await db.create_pool(_url(settings), max_size=2)
        try:
            return await work(pool)
        finally:
            await pool.close()

    try:
        return asyncio.run(main())
    except LineageError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc


@app.command()
def migrate(config: ConfigOption = None) -> None:
    """Create the application role if missing and upgrade the schema to the newest revision."""
    from lineage.migrate import migrate as upgrade

    settings = _settings(config)
    upgrade(_url(settings))
    console.print("schema is at the newest revision")


@app.command()
def stop(config: ConfigOption = None) -> None:
    """Stop the embedded PostgreSQL; its data stays for the next start."""
    from lineage.embedded import stop_embedded

    settings = _settings(config)
    if settings.database_url:
        console.print("LINEAGE_DATABASE_URL is set: there is no embedded server to stop")
        raise typer.Exit(1)
    stopped = stop_embedded(settings.data_dir)
    console.print(
        f"embedded PostgreSQL {'stopped' if stopped else 'was not running'}; "
        f"data kept in {settings.data_dir / 'pgdata'}"
    )


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
    config: ConfigOption = None,
) -> None:
    """Migrate, then serve the HTTP API (OpenAPI at /docs)."""
    import uvicorn

    from lineage.api.app import create_app
    from lineage.migrate import migrate as upgrade

    settings = _settings(config)
    url = _url(settings)
    upgrade(url)
    bind_host, bind_port = host or settings.host, port or settings.port
    console.print(f"serving on http://{bind_host}:{bind_port} (API docs at /docs)")
    uvicorn.run(create_app(settings, database_url=url), host=bind_host, port=bind_port)


@app.command()
def demo(config: ConfigOption = None) -> None:
    """Load the demo incident (idempotent) and walk its wrong answer back to the causes."""
    from lineage.claims.verify import Verification
    from lineage.demo import ANSWER_ID, load_incident, verify_incident
    from lineage.migrate import migrate as upgrade
    from lineage.store.postgres import PostgresStore

    settings = _settings(config)
    upgrade(_url(settings))

    async def work(
        pool: asyncpg.Pool,
    ) -> tuple[walks.Walk, list[dict[str, Any]], Verification]:
        contexts = await load_incident(PostgresStore(pool))
        console.print(f"loaded {len(contexts)} demo records (tenant default)")
        walk = await walks.walk_back(pool, settings, "default", ANSWER_ID, None)
        hops = await walks.suspicious_hops(pool, settings, "default", ANSWER_ID, None)
        return walk, hops, await verify_incident(pool)

    walk, hops, verification = _run(settings, work)
    console.print(
        f'\nQ: "What notice period do contractors get?"  A: "30 days" (answer id {ANSWER_ID})\n'
    )
    _print_walk(walk, hops)
    _print_hops(hops)
    console.print(f"\nClaim check (lineage verify {ANSWER_ID}):")
    for line in verification.lines():
        console.print(line, markup=False, highlight=False)
    console.print(
        f"\nNext: [bold]lineage serve[/bold], then GET "
        f"http://{settings.host}:{settings.port}/v1/contexts/{ANSWER_ID}/lineage "
        f"(API docs at http://{settings.host}:{settings.port}/docs); "
        f"or [bold]lineage walk {ANSWER_ID}[/bold]."
    )


def _hop_line(node: dict[str, Any], marks: dict[str, list[dict[str, Any]]]) -> str:
    made_by = " ".join(
        part
        for part in (
            node["transform_version"],
            node["produced_by"] and f"by {node['produced_by']}",
            node["index_snapshot"] and f"snapshot {node['index_snapshot']}",
            node["source_uri"],
        )
        if part
    )
    digest = node["content_hash"][:19]
    line = f"[bold]{node['kind']}[/bold] {node['context_id']}  {made_by}  [dim]{digest}…[/dim]"
    for mark in marks.get(node["context_id"], []):
        line += f"\n[red]⚠ {mark['reason']}[/red]: {mark['detail']}"
    return line


def _print_walk(walk: walks.Walk, hops: list[dict[str, Any]]) -> None:
    """Hop by hop from the start to the roots; a node reached again is only named."""
    by_id = {node["context_id"]: node for node in walk.nodes}
    marks: dict[str, list[dict[str, Any]]] = {}
    for hop in hops:
        marks.setdefault(hop["context_id"], []).append(hop)
    start = walk.nodes[0]
    tree = Tree(_hop_line(start, marks))
    shown = {start["context_id"]}

    def grow(branch: Tree, node: dict[str, Any]) -> None:
        for parent_id in node["parent_ids"]:
            parent = by_id.get(parent_id)
            if parent is None:
                branch.add(f"[dim]{parent_id} (beyond max depth)[/dim]")
            elif parent_id in shown:
                branch.add(f"[dim]{parent['kind']} {parent_id} (shown above)[/dim]")
            else:
                shown.add(parent_id)
                grow(branch.add(_hop_line(parent, marks)), parent)

    grow(tree, start)
    console.print(tree)
    if walk.truncated:
        console.print("[yellow]truncated: ancestors lie beyond --max-depth[/yellow]")


def _print_hops(hops: list[dict[str, Any]]) -> None:
    if not hops:
        console.print("\nno suspicious hops")
        return
    table = Table(title="Suspicious hops (sql/suspicious_hops.sql)")
    for column in ("depth", "kind", "context_id", "reason", "detail"):
        table.add_column(column, overflow="fold")
    for hop in hops:
        table.add_row(
            str(hop["depth"]), hop["kind"], hop["context_id"], hop["reason"], hop["detail"]
        )
    console.print(table)


@app.command()
def walk(
    context_id: Annotated[str, typer.Argument(help="The context to walk back from.")],
    output: Annotated[
        str, typer.Option("--format", help="tree (readable), json, or dot (Graphviz).")
    ] = "tree",
    max_depth: DepthOption = None,
    config: ConfigOption = None,
) -> None:
    """Walk a context back to its sources, suspicious hops marked."""
    settings = _settings(config)

    async def work(pool: asyncpg.Pool) -> tuple[walks.Walk, list[dict[str, Any]]]:
        found = await walks.walk_back(pool, settings, "default", context_id, max_depth)
        hops = await walks.suspicious_hops(pool, settings, "default", context_id, max_depth)
        return found, hops

    found, hops = _run(settings, work)
    if output == "json":
        print(
            json.dumps(
                {
                    "nodes": found.nodes,
                    "edges": found.edges(),
                    "truncated": found.truncated,
                    "suspicious": hops,
                },
                indent=2,
            )
        )
    elif output == "dot":
        print(_dot(found, hops))
    else:
        _print_walk(found, hops)
        _print_hops(hops)


def _dot(found: walks.Walk, hops: list[dict[str, Any]]) -> str:
    suspect = {hop["context_id"] for hop in hops}
    lines = ["digraph lineage {", "  rankdir=BT;"]
    for node in found.nodes:
        color = ', color="red"' if node["context_id"] in suspect else ""
        label = f"{node['kind']}\\n{node['context_id']}"
        lines.append(f'  "{node["context_id"]}" [label="{label}"{color}];')
    lines += [f'  "{edge["child"]}" -> "{edge["parent"]}";' for edge in found.edges()]
    return "\n".join([*lines, "}"])


@app.command()
def impact(
    source_uri: Annotated[str | None, typer.Option(help="A document's source URI.")] = None,
    transform_version: Annotated[
        str | None, typer.Option(help="e.g. chunker@1.4: what depends on its output.")
    ] = None,
    index_snapshot: Annotated[str | None, typer.Option(help="An index snapshot id.")] = None,
    context_id: Annotated[str | None, typer.Option(help="One context's blast radius.")] = None,
    kind: KindOption = "any",
    max_depth: DepthOption = None,
    output: Annotated[str, typer.Option("--format", help="table or ndjson.")] = "table",
    config: ConfigOption = None,
) -> None:
    """Blast radius: everything derived from a document, transform version, snapshot or id."""
    given = {
        name: value
        for name, value in {
            "source_uri": source_uri,
            "transform_version": transform_version,
            "index_snapshot": index_snapshot,
            "context_ids": [context_id] if context_id else None,
        }.items()
        if value is not None
    }
    if len(given) != 1:
        console.print(
            "[red]error:[/red] give exactly one of --source-uri, --transform-version, "
            "--index-snapshot, --context-id"
        )
        raise typer.Exit(2)
    settings = _settings(config)
    [(name, value)] = given.items()

    async def work(pool: asyncpg.Pool) -> list[dict[str, Any]]:
        return await walks.run(
            pool,
            settings,
            walks.IMPACT_QUERIES[name],
            tenant_id="default",
            kind=walks.check_kind(kind),
            max_depth=walks.check_depth(settings, max_depth),
            **{name: value},
        )

    _print_nodes(_run(settings, work), output)


@app.command()
def freshness(
    source_uri: Annotated[str, typer.Option(help="One document, or 'any'.")] = "any",
    kind: KindOption = "any",
    max_depth: DepthOption = None,
    output: Annotated[str, typer.Option("--format", help="table or ndjson.")] = "table",
    config: ConfigOption = None,
) -> None:
    """Records derived from a document revision that is no longer the newest."""
    settings = _settings(config)

    async def work(pool: asyncpg.Pool) -> list[dict[str, Any]]:
        return await walks.run(
            pool,
            settings,
            "stale_sources",
            tenant_id="default",
            source_uri=source_uri,
            kind=walks.check_kind(kind),
            max_depth=walks.check_depth(settings, max_depth),
        )

    _print_nodes(_run(settings, work), output)


def _print_nodes(nodes: list[dict[str, Any]], output: str) -> None:
    summary = walks.ImpactSummary()
    for node in nodes:
        summary.add(node)
    if output == "ndjson":
        for node in nodes:
            print(json.dumps(node))
        print(json.dumps({"summary": summary.as_dict()}))
        return
    table = Table()
    for column in ("depth", "kind", "context_id", "made by", "source_uri"):
        table.add_column(column, overflow="fold")
    for node in nodes:
        made_by = node["produced_by"] or node["transform_version"] or ""
        table.add_row(
            str(node["depth"]), node["kind"], node["context_id"], made_by, node["source_uri"] or ""
        )
    console.print(table)
    console.print(json.dumps(summary.as_dict()))


@app.command()
def verify(
    context_id: Annotated[str, typer.Argument(help="An answer (all its claims) or one claim.")],
    output: Annotated[str, typer.Option("--format", help="text or json.")] = "text",
    config: ConfigOption = None,
) -> None:
    """Judge an answer's claims against the contexts they cite (texts from context_text)."""
    from lineage.claims.verify import verify_command

    settings = _settings(config)
    result = _run(settings, lambda pool: verify_command(pool, "default", context_id))
    if output == "json":
        print(json.dumps(result.as_dict(), indent=2))
        return
    for line in result.lines():
        console.print(line, markup=False, highlight=False)


@report_app.command("claims")
def report_claims(
    since: Annotated[
        str | None, typer.Option(help="ISO date or time; default 30 days ago.")
    ] = None,
    bucket: Annotated[str, typer.Option(help="'1 hour', '1 day', '7 days'...")] = "1 day",
    group_by: Annotated[str, typer.Option("--group-by", help="produced_by.")] = "produced_by",
    output: Annotated[str, typer.Option("--format", help="table or ndjson.")] = "table",
    config: ConfigOption = None,
) -> None:
    """Failing claim rates (uncited, hallucinated_id, unsupported) per bucket and produced_by."""
    from lineage.claims.verify import claims_report, report_lines

    settings = _settings(config)
    rows = _run(
        settings, lambda pool: claims_report(pool, settings, "default", since, bucket, group_by)
    )
    if output == "ndjson":
        for row in rows:
            print(json.dumps(row))
        return
    for line in report_lines(rows):
        console.print(line, markup=False, highlight=False)


@sql_app.command("show")
def sql_show(name: Annotated[str, typer.Argument(help="A query name, e.g. walk_back.")]) -> None:
    """Print the exact file, ready for psql -f."""
    print(_query(name).text, end="")


@sql_app.command("list")
def sql_list() -> None:
    """Every named query and what it answers."""
    for query in QUERIES.values():
        console.print(f"[bold]{query.name}[/bold] ({', '.join(query.parameters)})")


@sql_app.command("run")
def sql_run(
    name: Annotated[str, typer.Argument(help="A query name, e.g. walk_back.")],
    variables: Annotated[
        list[str] | None, typer.Option("-v", help="name=value, as with psql -v.")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Run a named query with psql-style variables; one JSON object per row."""
    query = _query(name)
    given = dict(item.partition("=")[::2] for item in variables or [])
    missing = [p for p in query.parameters if p not in given]
    if missing:
        console.print(f"[red]error:[/red] {name} needs -v for: {', '.join(missing)}")
        raise typer.Exit(2)
    settings = _settings(config)

    async def work(pool: asyncpg.Pool) -> list[dict[str, Any]]:
        async with pool.acquire() as connection:
            statement = await connection.prepare(query.sql)
            types = ["array" if t.kind == "array" else t.name for t in statement.get_parameters()]
        values = {p: _convert(given[p], t) for p, t in zip(query.parameters, types, strict=True)}
        return await walks.run(pool, settings, name, **values)

    for row in _run(settings, work):
        print(json.dumps(row, default=str))


def _convert(text: str, type_name: str) -> Any:
    """psql variables are text; bind parameters want the type the query declares."""
    from datetime import UTC, datetime

    if type_name in {"int2", "int4", "int8"}:
        return int(text)
    if type_name == "timestamptz":
        bounds = {"-infinity": datetime.min, "infinity": datetime.max}
        moment = bounds.get(text) or datetime.fromisoformat(text)
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    if type_name == "array":
        return [item.strip().strip('"') for item in text.strip("{}").split(",") if item.strip()]
    return text


def _query(name: str) -> Any:
    if name not in QUERIES:
        console.print(f"[red]error:[/red] no query {name!r}; try: {', '.join(QUERIES)}")
        raise typer.Exit(2)
    return QUERIES[name]
