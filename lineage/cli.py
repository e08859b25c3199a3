"""The `lineage` command: serve, migrate, demo, walk, impact, freshness, sql."""

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import asyncpg
import typer
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from lineage import db
from lineage.core import telemetry
from lineage.core.errors import LineageError
from lineage.db.queries import QUERIES
from lineage.services import walks
from lineage.settings import Settings, effective_auth, load_settings

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


def _settings(config: Path | None) -> Settings:
    # Read afresh on every command: the environment may differ between invocations in one process.
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


def _run(
    settings: Settings, work: Callable[[asyncpg.Pool], Awaitable[T]], *, as_owner: bool = False
) -> T:
    """Open a pool, do the work, close it; errors a user can act on become one red line."""

    async def main() -> T:
        pool = await db.create_pool(_url(settings), max_size=2, as_owner=as_owner)
        try:
            return await work(pool)
        finally:
            await pool.close()

    # One trace id per run: the records it makes carry it, and so does its error line.
    with telemetry.trace_context() as trace_id:
        try:
            return asyncio.run(main())
        except LineageError as exc:
            console.print(f"[red]error:[/red] {exc} [dim](trace_id {trace_id})[/dim]")
            raise typer.Exit(1) from exc


@app.command()
def migrate(config: ConfigOption = None) -> None:
    """Create the application role if missing and upgrade the schema to the newest revision."""
    from lineage.db.migrate import migrate as upgrade

    settings = _settings(config)
    upgrade(_url(settings))
    console.print("schema is at the newest revision")


@app.command()
def stop(config: ConfigOption = None) -> None:
    """Stop the embedded PostgreSQL; its data stays for the next start."""
    from lineage.db.embedded import stop_embedded

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
    """Serve the HTTP API (OpenAPI at /docs), migrating first; while the database is down it
    retries, with /readyz answering 503."""
    import uvicorn

    from lineage.api.app import create_app
    from lineage.api.logs import log_config

    settings = _settings(config)
    url = _url(settings)
    bind_host, bind_port = host or settings.host, port or settings.port
    settings = serving_settings(settings, bind_host)
    console.print(f"serving on http://{bind_host}:{bind_port} (API docs at /docs)")
    if settings.auth == "none":
        console.print(
            "[yellow]authentication off[/yellow] (embedded database on loopback): every "
            "request acts as tenant 'default'; LINEAGE_AUTH=keys turns keys on"
        )
    else:
        console.print("authentication: bearer keys (`lineage key create --tenant NAME`)")
    console.print(f"explorer: [bold]http://{bind_host}:{bind_port}/ui[/bold] (paste an answer id)")
    uvicorn.run(
        create_app(settings, database_url=url, migrate_first=True),  # waits for the database
        host=bind_host,
        port=bind_port,
        log_config=log_config(settings.log_level),
        access_log=False,  # lineage.access logs each request, with its trace id
    )


def serving_settings(settings: Settings, bind_host: str) -> Settings:
    """The settings to serve with: authentication decided here, by the address actually bound
    and whether the database is the embedded one, since the app is handed a resolved URL."""
    bound = settings.model_copy(update={"host": bind_host})
    return bound.model_copy(
        update={"auth": effective_auth(bound, embedded=not settings.database_url)}
    )


@app.command()
def demo(config: ConfigOption = None) -> None:
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

    settings = _settings(config)
    upgrade(_url(settings))

    async def work(pool: asyncpg.Pool) -> tuple[walks.Walk, list[dict[str, Any]], list[str]]:
        contexts = await load_incident(PostgresStore(pool))
        console.print(f"loaded {len(contexts)} demo records (tenant default)")
        return await story(pool, settings)

    walk, hops, lines = _run(settings, work)
    console.print(
        f'\nQ: "What notice period do contractors get?"  A: "30 days" (answer id {ANSWER_ID}): '
        f"wrong; the revised contractor policy says {CORRECT_ANSWER}.\n"
        f"The walk back, four hops from the answer to the stale document:\n"
    )
    _print_walk(walk, hops)
    _print_hops(hops)
    for line in lines:
        console.print(line, markup=False, highlight=False)
    console.print(
        f"\nNext: [bold]lineage serve[/bold], then open "
        f"http://{settings.host}:{settings.port}/ui and paste {ANSWER_ID} "
        f"(API docs at http://{settings.host}:{settings.port}/docs); "
        f"or [bold]lineage walk {ANSWER_ID}[/bold], [bold]lineage verify {SUMMARY_ID}[/bold]."
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
    context_id: Annotated[
        str,
        typer.Argument(
            help="An answer (all its claims), a claim, or a summary, reasoning, plan "
            "or tool_call (each statement against its parents)."
        ),
    ],
    output: Annotated[str, typer.Option("--format", help="text or json.")] = "text",
    config: ConfigOption = None,
) -> None:
    """Judge an LLM-made record against its sources (texts from context_text); appends verdicts."""
    from lineage.claims.handoffs import verify_command
    from lineage.claims.judges import judge_from_settings

    settings = _settings(config)
    result = _run(
        settings,
        # LINEAGE_CLAIM_JUDGE: offline, openai or a plug-in (named errors come from _run)
        lambda pool: verify_command(pool, "default", context_id, judge_from_settings(settings)),
    )
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


@report_app.command("drift")
def report_drift(
    since: Annotated[
        str | None, typer.Option(help="ISO date or time; default 30 days ago.")
    ] = None,
    bucket: Annotated[str, typer.Option(help="'1 day', '7 days'...")] = "1 day",
    output: Annotated[str, typer.Option("--format", help="table or ndjson.")] = "table",
    config: ConfigOption = None,
) -> None:
    """Unsupported and merged rates per bucket and produced_by, with the change since the last."""
    from lineage.claims.drift import drift_lines, drift_report

    settings = _settings(config)
    rows = _run(settings, lambda pool: drift_report(pool, settings, "default", since, bucket))
    if output == "ndjson":
        for row in rows:
            print(json.dumps(row))
        return
    for line in drift_lines(rows):
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


# --- export: a context's provenance in the standard vocabularies -------------------------------

export_app = typer.Typer(
    help="Export provenance: W3C PROV documents, headers for generated files.",
    no_args_is_help=True,
)
app.add_typer(export_app, name="export")


@export_app.command("prov")
def export_prov(
    context_id: Annotated[str, typer.Argument(help="The context whose walk-back to export.")],
    output: Annotated[str, typer.Option("--format", help="json, provn, jsonld or xml.")] = "json",
    max_depth: DepthOption = None,
    config: ConfigOption = None,
) -> None:
    """A context's walk-back as a W3C PROV document: contexts as entities, transforms as
    activities, produced_by as agents."""
    from lineage.interop import prov

    if output not in prov.MEDIA_TYPES:
        console.print(f"[red]error:[/red] --format must be one of {', '.join(prov.MEDIA_TYPES)}")
        raise typer.Exit(2)
    settings = _settings(config)
    found = _run(
        settings, lambda pool: walks.walk_back(pool, settings, "default", context_id, max_depth)
    )
    try:
        print(prov.serialize(prov.prov_document(found, "default"), output))
    except prov.UnavailableFormat as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc


@export_app.command("header")
def export_header(
    context_id: Annotated[str, typer.Argument(help="The answer (or any context) to describe.")],
    output: Annotated[
        str, typer.Option("--format", help="yaml (front-matter) or json (envelope).")
    ] = "yaml",
    config: ConfigOption = None,
) -> None:
    """Provenance for a generated file: trace id, operation, provider, model, inputs
    fingerprint, generated time and the ids it consumed."""
    from lineage.interop import headers

    if output not in {"yaml", "json"}:
        console.print("[red]error:[/red] --format must be yaml or json")
        raise typer.Exit(2)
    settings = _settings(config)
    header = _run(settings, lambda pool: headers.provenance_header(pool, "default", context_id))
    if output == "json":
        print(json.dumps(headers.envelope(header), indent=2))
    else:
        print(headers.front_matter(header), end="")


spool_app = typer.Typer(
    help="Records kept locally while the store was down: see them, send them.",
    no_args_is_help=True,
)
app.add_typer(spool_app, name="spool")


@spool_app.command("status")
def spool_status(config: ConfigOption = None) -> None:
    """Records waiting in the local spool, per tenant, and batches the store refused."""
    from lineage.store.spool import SpoolFile, spool_dir, spooled_tenants

    directory = spool_dir(_settings(config))
    tenants = spooled_tenants(directory)
    if not tenants:
        console.print(f"nothing spooled in {directory}")
        return
    table = Table(title=f"spool in {directory}")
    for column in ("tenant", "batches", "records", "oldest", "rejected batches"):
        table.add_column(column)
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
    from lineage.store import HttpStore, PostgresStore
    from lineage.store.postgres import OUTAGE_ERRORS
    from lineage.store.spool import Replay, SpoolingStore, spool_dir, spooled_tenants

    settings = _settings(config)
    directory = spool_dir(settings)
    tenants = [tenant] if tenant else spooled_tenants(directory)
    if api_url and len(tenants) > 1:
        console.print("[red]error:[/red] an API key belongs to one tenant: give --tenant")
        raise typer.Exit(2)

    async def through_api() -> dict[str, Replay]:
        replays = {}
        for name in tenants:
            http = HttpStore(str(api_url), name, api_key)
            try:
                replays[name] = await SpoolingStore(http, directory).replay()
            finally:
                await http.aclose()
        return replays

    async def to_database(pool: asyncpg.Pool) -> dict[str, Replay]:
        return {
            name: await SpoolingStore(PostgresStore(pool, name), directory).replay()
            for name in tenants
        }

    try:
        replays = asyncio.run(through_api()) if api_url else _run(settings, to_database)
    except OUTAGE_ERRORS as exc:
        console.print(f"[red]error:[/red] the database is unavailable ({exc}); nothing replayed")
        raise typer.Exit(1) from exc
    for name, replay in replays.items():
        waiting = f", {replay.remaining} still waiting ({replay.error})" if replay.remaining else ""
        console.print(
            f"tenant {name}: {replay.replayed} replayed, {replay.rejected} rejected{waiting}"
        )
    if any(replay.remaining for replay in replays.values()):
        raise typer.Exit(1)


# --- lineage log: the verifiable log (lineage/verifiable_log/) ----------------------------------

log_app = typer.Typer(
    help="The verifiable log: signed checkpoints, and checks of them that need no trust in the "
    "server. Records and proofs come from the database, like every command, or from the API "
    "with --url; every check runs here.",
    no_args_is_help=True,
)
app.add_typer(log_app, name="log")

UrlOption = Annotated[
    str | None,
    typer.Option("--url", help="Ask this lineage API (http://host:port), not the database."),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option("--api-key", envvar="LINEAGE_API_KEY", help="Bearer key (read scope) for --url."),
]
VerifierKeyOption = Annotated[
    str | None,
    typer.Option(
        "--key",
        help="The verifier key (as `lineage log key` or GET /v1/log/key gives it) or a file "
        "holding it; default: the signing key on this machine.",
    ),
]


def _log_run(
    settings: Settings,
    url: str | None,
    api_key: str | None,
    tenant_id: str,
    work: Callable[[Any], Awaitable[T]],
) -> T:
    """Do the work with a LogSource: the database (as `tenant_id`) or, with a URL, the API."""
    from lineage.verifiable_log.audit import DatabaseSource, HttpSource

    if url is None:
        return _run(settings, lambda pool: work(DatabaseSource(pool, settings, tenant_id)))

    async def main() -> T:
        import httpx

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:
            return await work(HttpSource(client))

    # One trace id per run: the records it makes carry it, and so does its error line.
    with telemetry.trace_context() as trace_id:
        try:
            return asyncio.run(main())
        except LineageError as exc:
            console.print(f"[red]error:[/red] {exc} [dim](trace_id {trace_id})[/dim]")
            raise typer.Exit(1) from exc


def _verifier_key(settings: Settings, key: str | None) -> Any:
    from lineage.verifiable_log.checkpoint import CheckpointError, VerifierKey, load_signing_key

    try:
        if key is not None:
            given = Path(key)
            return VerifierKey.parse(given.read_text() if given.is_file() else key)
        path = settings.log_signing_key_file or settings.data_dir / "log-signing-key.pem"
        if not path.exists():
            raise CheckpointError(
                f"no --key given and no signing key on this machine ({path}): pass --key with "
                "the verifier key the service publishes (GET /v1/log/key)"
            )
        return load_signing_key(path, settings.log_origin, create=False).verifier
    except LineageError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc


def _open_checkpoint(verifier: Any, note: str) -> Any:
    try:
        return verifier.open(note)
    except LineageError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc


@log_app.command("key")
def log_key(config: ConfigOption = None) -> None:
    """Print the verifier key of this service's checkpoints (made on first use); publish it."""
    from lineage.verifiable_log.storage import signing_key

    print(signing_key(_settings(config)).verifier)


@log_app.command("checkpoint")
def log_checkpoint(
    out: Annotated[Path | None, typer.Option("--out", help="Save it to this file.")] = None,
    tenant: Annotated[str, typer.Option(help="Whose log (database only).")] = "default",
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    config: ConfigOption = None,
) -> None:
    """Bring the log up to date and print (or save) its newest signed checkpoint. Without
    --url this signs as the service does, with the key in LINEAGE_DATA_DIR (or
    LINEAGE_LOG_SIGNING_KEY_FILE): run it where the service runs."""
    from lineage.verifiable_log import storage
    from lineage.verifiable_log.checkpoint import Checkpoint

    settings = _settings(config)
    if url is None:  # this machine acts as the service: its signing key must be the log's
        signed = _run(settings, lambda pool: storage.checkpoint(pool, settings, tenant))
        note = signed.note
    else:
        note = _log_run(settings, url, api_key, tenant, lambda source: source.checkpoint())
    if out is None:
        print(note, end="")
        return
    out.write_text(note)
    made = Checkpoint.from_note(note)
    console.print(f"saved checkpoint of {made.origin}, {made.tree_size} records, to {out}")


@log_app.command("verify")
def log_verify(
    context_id: Annotated[str, typer.Argument(help="The record whose lineage to check.")],
    checkpoint: Annotated[
        Path, typer.Option("--checkpoint", help="A saved checkpoint.", exists=True, dir_okay=False)
    ],
    key: VerifierKeyOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    config: ConfigOption = None,
) -> None:
    """Check, without trusting the server, that a record and its whole walk-back are in the
    log under a saved checkpoint, unchanged. Exits 1 if any is not."""
    from lineage.verifiable_log.audit import verify_walk

    settings = _settings(config)
    verifier = _verifier_key(settings, key)
    note = checkpoint.read_text()
    tenant_id = _open_checkpoint(verifier, note).tenant_id
    result = _log_run(
        settings,
        url,
        api_key,
        tenant_id,
        lambda source: verify_walk(source, verifier, note, context_id),
    )
    for line in result.lines():
        console.print(line, markup=False, highlight=False)
    if not result.ok:
        raise typer.Exit(1)


@log_app.command("monitor")
def log_monitor(
    old: Annotated[
        Path, typer.Option("--old", help="The saved older checkpoint.", exists=True, dir_okay=False)
    ],
    out: Annotated[
        Path | None, typer.Option("--out", help="Save the new checkpoint (may be --old's file).")
    ] = None,
    key: VerifierKeyOption = None,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    config: ConfigOption = None,
) -> None:
    """Check that the log's newest checkpoint extends a saved older one: nothing was rewritten
    or removed. Exits 1 if it does not."""
    from lineage.verifiable_log.audit import monitor

    settings = _settings(config)
    verifier = _verifier_key(settings, key)
    note = old.read_text()
    tenant_id = _open_checkpoint(verifier, note).tenant_id
    checked = _log_run(
        settings, url, api_key, tenant_id, lambda source: monitor(source, verifier, note)
    )
    before, after = checked.old.tree_size, checked.new.tree_size
    change = f"grew from {before} to {after}" if after > before else f"still has {before}"
    console.print(
        f"consistent: {checked.new.origin} {change} records, append-only", highlight=False
    )
    if out is not None:
        out.write_text(checked.new_note)
        console.print(f"saved the new checkpoint to {out}")


# --- tenants, keys and the audit log --------------------------------------------------------

tenant_app = typer.Typer(help="Tenants: each one's records are invisible to the others.")
app.add_typer(tenant_app, name="tenant")
key_app = typer.Typer(help="Bearer keys, scoped ingest | read | admin; only hashes are kept.")
app.add_typer(key_app, name="key")
audit_app = typer.Typer(help="Who walked, exported, verified or forgot what, and when.")
app.add_typer(audit_app, name="audit")
TenantOption = Annotated[str, typer.Option("--tenant", help="The tenant's name.")]


@tenant_app.command("create")
def tenant_create(name: str, config: ConfigOption = None) -> None:
    """Create a tenant (as the database owner; the service's role cannot)."""
    from lineage.services import auth

    settings = _settings(config)
    created = _run(settings, lambda pool: auth.create_tenant(pool, name), as_owner=True)
    console.print(f"tenant {name} " + ("created" if created else "exists already"))


@key_app.command("create")
def key_create(
    tenant: TenantOption,
    scope: Annotated[str, typer.Option("--scope", help="ingest, read, verify or admin.")] = "read",
    label: Annotated[str | None, typer.Option("--label", help="What the key is for.")] = None,
    config: ConfigOption = None,
) -> None:
    """Create a key and print it once; store it now, it cannot be shown again."""
    from lineage.services import auth

    settings = _settings(config)
    token, row = _run(settings, lambda pool: auth.create_key(pool, tenant, scope, label))
    console.print(f"key {row['key_id']} ({row['scope']}) for tenant {tenant}; shown once:")
    print(token)


@key_app.command("list")
def key_list(tenant: TenantOption, config: ConfigOption = None) -> None:
    """The tenant's keys (ids, scopes, labels; never secrets)."""
    from lineage.services import auth

    rows = _run(_settings(config), lambda pool: auth.list_keys(pool, tenant))
    table = Table("key id", "scope", "label", "created", "revoked")
    for row in rows:
        table.add_row(
            row["key_id"], row["scope"], row["label"] or "", str(row["created_at"]),
            str(row["revoked_at"] or ""),
        )  # fmt: skip
    console.print(table)


@key_app.command("revoke")
def key_revoke(key_id: str, tenant: TenantOption, config: ConfigOption = None) -> None:
    """Revoke a key: the next request with it gets 401."""
    from lineage.services import auth

    _run(_settings(config), lambda pool: auth.revoke_key(pool, tenant, key_id))
    console.print(f"key {key_id} revoked")


@audit_app.command("list")
def audit_list(
    tenant: TenantOption,
    since: Annotated[str, typer.Option("--since", help="An ISO time.")] = "1970-01-01T00:00:00Z",
    limit: Annotated[int, typer.Option("--limit")] = 100,
    config: ConfigOption = None,
) -> None:
    """The tenant's audit records, oldest first, one JSON object per line."""
    from datetime import datetime

    from lineage.services import audit

    start = datetime.fromisoformat(since)
    rows = _run(_settings(config), lambda pool: audit.entries(pool, tenant, start, limit))
    for row in rows:
        print(json.dumps(row, default=str))


# --- signed records (lineage/services/signing.py) ------------------------------------------

signing_key_app = typer.Typer(
    help="The keyring whose HMAC-SHA256 keys sign each record; it lives outside the database.",
    no_args_is_help=True,
)
app.add_typer(signing_key_app, name="signing-key")


def _signing_error(exc: LineageError) -> typer.Exit:
    console.print(f"[red]error:[/red] {exc}")
    return typer.Exit(1)


@signing_key_app.command("rotate")
def signing_key_rotate(config: ConfigOption = None) -> None:
    """Add a newer key: new records are signed with it, the older keys still verify.
    Restart the service (every replica, with the same file) to sign with it."""
    from lineage.services.signing import keyring_path, rotate_keyring

    path = keyring_path(_settings(config))
    try:
        added = rotate_keyring(path)
    except LineageError as exc:
        raise _signing_error(exc) from exc
    console.print(
        f"added signing key {added.key_id} to {path}; restart the service (every replica, with "
        "this file) so that new records are signed with it",
        highlight=False,
    )


@signing_key_app.command("list")
def signing_key_list(config: ConfigOption = None) -> None:
    """The keyring's key ids, oldest first, the signing one marked; never the secrets."""
    from lineage.services.signing import keyring_path, read_keyring

    path = keyring_path(_settings(config))
    try:
        keys = read_keyring(path) if path.exists() else []
    except LineageError as exc:
        raise _signing_error(exc) from exc
    if not keys:
        console.print(f"no signing keyring at {path} yet: the first record signed makes one")
        return
    table = Table("key id", "created", "signs new records", title=str(path))
    for key in keys:
        table.add_row(key.key_id, key.created_at, "yes" if key is keys[-1] else "")
    console.print(table)


@app.command("verify-record")
def verify_record(
    context_id: Annotated[str, typer.Argument(help="The record whose signature to check.")],
    tenant: Annotated[str, typer.Option("--tenant", help="The record's tenant.")] = "default",
    output: Annotated[str, typer.Option("--format", help="text or json.")] = "text",
    config: ConfigOption = None,
) -> None:
    """Check a record's stored row against its stored signature: signed, verified, reason (ok,
    unsigned, mismatch, unknown_key). Exits 1 unless verified."""
    from lineage.core.errors import NotFound
    from lineage.services import signing
    from lineage.store.postgres import get_records

    settings = _settings(config)

    async def work(pool: asyncpg.Pool) -> signing.SignatureCheck:
        signer = signing.load_keyring(signing.keyring_path(settings), create=False)
        async with db.transaction(pool, tenant) as connection:
            record = (await get_records(connection, tenant, [context_id])).get(context_id)
            if record is None:
                raise NotFound(f"no context {context_id} in tenant {tenant}")
            return await signing.verify_record(connection, tenant, record, signer)

    check = _run(settings, work)
    if output == "json":
        print(json.dumps({"context_id": context_id, **check.as_dict()}))
    else:
        console.print(
            f"{context_id}: signed {str(check.signed).lower()}, verified "
            f"{str(check.verified).lower()}, key {check.key_id or '-'}, reason {check.reason}",
            highlight=False,
        )
    if not check.verified:
        raise typer.Exit(1)


@app.command()
def selftest(config: ConfigOption = None) -> None:
    """Show the signing cycle on a throwaway database that it creates on the configured server
    and drops: build, sign, store, read back, verify, alter as the owner, verify false. The
    configured database's data is never touched. Exits 1 if a step fails."""
    from rich.markup import escape

    from lineage.services.selftest import run_selftest
    from lineage.services.signing import signer_for

    settings = _settings(config)
    try:
        signer = signer_for(settings)
    except LineageError as exc:
        raise _signing_error(exc) from exc

    def report(ok: bool, text: str) -> None:
        mark = "[green]✓[/green]" if ok else "[red]✗[/red]"
        console.print(f"{mark} {escape(text)}", highlight=False)

    if not run_selftest(_url(settings), signer, report):
        raise typer.Exit(1)


# --- privacy: capture switches and the right to be forgotten (lineage/services/privacy.py) ---

# Rows of affected ids the terminal shows; --output holds them all.
FORGET_ROWS_SHOWN = 100


def _switch(name: str, what: str) -> Any:
    return typer.Option(f"--{name}/--no-{name}", help=f"Capture {what} (default: unchanged).")


@tenant_app.command("settings")
def tenant_settings(
    name: Annotated[str, typer.Argument(help="The tenant's name.")],
    capture_source_text: Annotated[
        bool | None, _switch("capture-source-text", "document, chunk, summary... text")
    ] = None,
    capture_query_text: Annotated[bool | None, _switch("capture-query-text", "query text")] = None,
    capture_answer_text: Annotated[
        bool | None, _switch("capture-answer-text", "answer and claim text")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Show a tenant's text capture switches, or turn them on or off (all off by default)."""
    from lineage.services import privacy
    from lineage.services.auth import Caller

    changes = {
        "capture_source_text": capture_source_text,
        "capture_query_text": capture_query_text,
        "capture_answer_text": capture_answer_text,
    }
    caller = Caller(name, None, "admin")
    if all(on is None for on in changes.values()):
        shown = _run(_settings(config), lambda pool: privacy.get_settings(pool, name))
    else:
        shown = _run(_settings(config), lambda pool: privacy.update_settings(pool, caller, changes))
    table = Table("switch", "captures", title=f"tenant {name}")
    for switch in privacy.CAPTURE_SWITCHES:
        table.add_row(switch, "on" if getattr(shown, switch) else "off")
    console.print(table)


@app.command("forget")
def forget_source(
    source_uri: Annotated[
        str, typer.Option("--source-uri", help="The source_uri exactly as it was recorded.")
    ],
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant's name.")] = "default",
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

    settings = _settings(config)
    caller = Caller(tenant, None, "admin")
    forgotten = _run(settings, lambda pool: forget(pool, settings, caller, source_uri, max_depth))
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


# --- bench -------------------------------------------------------------------------------------

BENCH_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


@app.command("bench")
def bench(
    size: Annotated[str, typer.Option(help="100k, 1M, 10M or a number of records.")] = "100k",
    server_url: Annotated[
        str,
        typer.Option(
            "--server-url",
            envvar="LINEAGE_BENCH_SERVER_URL",
            help="A PostgreSQL superuser URL; the bench makes its own database there. "
            "'embedded' uses the embedded server.",
        ),
    ] = BENCH_SERVER,
    reuse: Annotated[
        bool,
        typer.Option(
            help="Time the DAG a previous run generated (faster; it also holds that run's "
            "ingested records, so figures drift from a fresh run's)."
        ),
    ] = False,
    output: Annotated[Path, typer.Option(help="Where to write the report.")] = Path(
        "bench/RESULTS.md"
    ),
    startup: Annotated[bool, typer.Option(help="Time the embedded start-up too.")] = True,
    load_seconds: Annotated[float, typer.Option(help="Length of the load run.")] = 20.0,
    config: ConfigOption = None,
) -> None:
    """Benchmark walks and ingest against the baselines on a synthetic RAG DAG; write a report.

    Runs from a source checkout (bench/ is not part of the installed package)."""
    import sys

    checkout = Path(__file__).resolve().parent.parent
    if not (checkout / "bench" / "run.py").exists():
        console.print("[red]error:[/red] lineage bench runs from a source checkout with bench/")
        raise typer.Exit(2)
    sys.path.insert(0, str(checkout))
    from bench.dag import parse_size
    from bench.run import Plan, run

    try:
        parse_size(size)
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    if server_url == "embedded":
        from lineage.db.embedded import start_embedded

        server_url = start_embedded(_settings(config).data_dir)
    plan = Plan(
        size=size,
        server_url=server_url,
        reuse=reuse,
        startup=startup,
        load_seconds=load_seconds,
        output=output,
    )
    report = asyncio.run(run(plan))
    console.print(report.table())
    console.print(f"wrote {output}")


# --- data lifecycle: tenant deletion (lineage/services/tenant_deletion.py) ----------------------

diagnostics = Console(stderr=True)


@tenant_app.command("delete")
def tenant_delete(
    name: Annotated[str, typer.Argument(help="The tenant to delete.")],
    confirm: Annotated[
        str | None,
        typer.Option("--confirm", help="The tenant's name again, instead of typing it when asked."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Delete a tenant and every row it holds, in every table (as the database owner); prints
    the receipt written to the operator's audit trail. Irreversible: export it first."""
    from lineage.services.tenant_deletion import delete_tenant

    typed = confirm
    if typed is None:
        typed = typer.prompt(
            f"Every record, signature, log entry, key and audit row of tenant {name} will be "
            "deleted. Type its name to confirm",
            err=True,
        )
    if typed != name:
        diagnostics.print(f"[red]error:[/red] {typed!r} is not {name!r}: nothing deleted")
        raise typer.Exit(2)
    receipt = _run(_settings(config), lambda pool: delete_tenant(pool, name), as_owner=True)
    print(json.dumps(receipt, indent=2, default=str))
    total = sum(receipt["rows"].values())
    diagnostics.print(
        f"tenant {name} deleted: {total} rows in {len(receipt['rows'])} tables; the receipt is "
        "in the operator's audit trail (`lineage audit operator`)",
        highlight=False,
    )


@audit_app.command("operator")
def audit_operator(
    since: Annotated[str, typer.Option("--since", help="An ISO time.")] = "1970-01-01T00:00:00Z",
    limit: Annotated[int, typer.Option("--limit")] = 100,
    config: ConfigOption = None,
) -> None:
    """The operator's audit trail (tenant deletions and their receipts), oldest first, one JSON
    object per line. As the database owner."""
    from datetime import datetime

    from lineage.services.tenant_deletion import operator_entries

    start = datetime.fromisoformat(since)
    rows = _run(_settings(config), lambda pool: operator_entries(pool, start, limit), as_owner=True)
    for row in rows:
        print(json.dumps(row, default=str))


# --- data lifecycle: export bundles and their import (lineage/bundle/) --------------------------


@export_app.command("bundle")
def export_bundle(
    tenant: TenantOption,
    output: Annotated[Path, typer.Option("--output", help="The bundle file to write.")],
    include_text: Annotated[
        bool, typer.Option("--include-text", help="Add the tenant's captured text.")
    ] = False,
    config: ConfigOption = None,
) -> None:
    """A tenant's records in canonical form with their signatures, log leaves and newest signed
    checkpoint, one JSON line each, for `lineage import`. Signs a checkpoint first, as the
    service does: run it where the service runs, as the database owner."""
    from lineage.bundle.export import export_bundle as write_bundle

    settings = _settings(config)
    exported = _run(
        settings,
        lambda pool: write_bundle(pool, settings, tenant, output, include_text=include_text),
        as_owner=True,
    )
    diagnostics.print(
        f"wrote {exported.records} records and {exported.texts} texts of tenant {tenant} to "
        f"{output} (checkpoint of {exported.tree_size} records)",
        highlight=False,
    )


@app.command("import")
def import_bundle(
    bundle_file: Annotated[
        Path, typer.Argument(help="A bundle from `lineage export bundle`.", dir_okay=False)
    ],
    tenant: TenantOption,
    key: VerifierKeyOption = None,
    config: ConfigOption = None,
) -> None:
    """Verify a bundle against its signed checkpoint and Merkle tree, then write it into a new
    or empty tenant in one transaction: all or nothing. Exits 1, writing nothing, if a record
    is missing, added, reordered or altered. As the database owner."""
    from lineage.bundle.load import import_bundle as load_bundle
    from lineage.services import signing

    settings = _settings(config)
    verifier = _verifier_key(settings, key)
    try:
        signer = signing.signer_for(settings)
    except LineageError as exc:
        raise _signing_error(exc) from exc
    imported = _run(
        settings,
        lambda pool: load_bundle(pool, settings, bundle_file, tenant, verifier, signer),
        as_owner=True,
    )
    checked = imported.verified
    print(
        json.dumps(
            {
                "tenant_id": imported.tenant_id,
                "from_tenant": checked.header.tenant_id,
                "records": checked.records,
                "texts": checked.texts,
                "kinds": checked.kinds,
                "signatures_checked": checked.signatures_checked,
                "signatures_unchecked": checked.signatures_unchecked,
                "unsigned": checked.unsigned,
                "tree_size": imported.tree_size,
            }
        )
    )
    diagnostics.print(
        f"imported {checked.records} records into tenant {tenant}, verified against the "
        f"bundle's checkpoint of {checked.checkpoint.tree_size} records",
        highlight=False,
    )
