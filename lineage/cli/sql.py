"""`lineage sql`: the named queries in lineage/sql, printed for psql or run by name."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lineage.cli.errors import fail
from lineage.cli.runner import ConfigOption, console, load, run

if TYPE_CHECKING:
    from lineage.db.database import Database
    from lineage.db.named_sql import NamedQuery

sql_app = typer.Typer(help="The named queries in sql/: print them, run them.", no_args_is_help=True)


def _query(name: str) -> NamedQuery:
    from lineage.db.named_sql import QUERIES

    if name not in QUERIES:
        raise fail(f"no query {name!r}; try: {', '.join(QUERIES)}", 2)
    return QUERIES[name]


@sql_app.command("show")
def sql_show(name: Annotated[str, typer.Argument(help="A query name, e.g. walk_back.")]) -> None:
    """Print the exact file, ready for psql -f."""
    print(_query(name).text, end="")


@sql_app.command("list")
def sql_list() -> None:
    """Every named query and what it answers."""
    from lineage.db.named_sql import QUERIES

    for query in QUERIES.values():
        console.print(f"[bold]{query.name}[/bold] ({', '.join(query.parameters)})")


@sql_app.command("run")
def sql_run(
    name: Annotated[str, typer.Argument(help="A query name, e.g. walk_back.")],
    variables: Annotated[
        list[str] | None, typer.Option("-v", help="name=value, as with psql -v.")
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", help="The tenant whose data to use (sets -v tenant_id)."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Run a named query with psql-style variables; one JSON object per row."""
    from lineage.services import reads

    query = _query(name)
    given = dict(item.partition("=")[::2] for item in variables or [])
    if tenant is not None:
        if given.get("tenant_id", tenant) != tenant:
            raise fail("--tenant and -v tenant_id name different tenants", 2)
        given["tenant_id"] = tenant
    missing = [p for p in query.parameters if p not in given]
    if missing:
        raise fail(f"{name} needs -v for: {', '.join(missing)}", 2)
    unknown = [p for p in given if p not in query.parameters]
    if unknown:
        raise fail(f"{name} takes no -v {', '.join(unknown)}", 2)
    settings = load(config)

    async def work(database: Database) -> list[dict[str, Any]]:
        return await reads.run_as_psql(database, settings, name, given)

    for row in run(settings, work):
        print(json.dumps(row, default=str))
