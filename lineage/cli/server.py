"""The server's life: migrate (and on Citus distribute) the schema, serve the API, stop the
embedded PostgreSQL."""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Annotated

import typer

from lineage.cli.errors import diagnostics, fail, reported
from lineage.cli.runner import ConfigOption, console, database_url, load

if TYPE_CHECKING:
    from lineage.settings import Settings


def migrate(config: ConfigOption = None) -> None:
    """Create the application role if missing and upgrade the schema to the newest revision."""
    from lineage.cli.progress import progress_bar
    from lineage.db.migrate import migrate as upgrade

    url = database_url(load(config))
    with progress_bar() as progress:
        upgrade(url, progress=progress)
    console.print("schema is at the newest revision")


def distribute(config: ConfigOption = None) -> None:
    """On a Citus coordinator: distribute every tenant table by tenant_id (colocated), api_keys
    as a reference table. Idempotent; run `lineage migrate` first. Says what it did."""
    from lineage.cli.progress import progress_bar
    from lineage.db.distribute import distribute as distribute_schema

    url = database_url(load(config))
    with reported(), progress_bar() as progress:
        done = distribute_schema(url, progress)
    for line in done:
        console.print(line, highlight=False)


def isolate(
    tenant: Annotated[str, typer.Argument(help="The tenant to give a shard group of its own.")],
    worker: Annotated[
        str, typer.Option(help="HOST:PORT of the worker to place it on (not its current one).")
    ],
    config: ConfigOption = None,
) -> None:
    """On a Citus coordinator: split the tenant's shard group so that it holds the tenant
    alone, placed on WORKER, by logical replication while writes go on."""
    from lineage.db.distribute import isolate as isolate_tenant

    host, _, port = worker.rpartition(":")
    if not host or not port.isdigit():
        raise fail(f"--worker {worker!r}: give HOST:PORT, as citus_add_node was given")
    url = database_url(load(config))
    with reported():
        console.print(isolate_tenant(url, tenant, host, int(port)), highlight=False)


def stop(config: ConfigOption = None) -> None:
    """Stop the embedded PostgreSQL; its data stays for the next start."""
    from lineage.db.embedded import stop_embedded

    settings = load(config)
    if settings.database_url:
        raise fail("LINEAGE_DATABASE_URL is set: there is no embedded server to stop")
    stopped = stop_embedded(settings.data_dir)
    console.print(
        f"embedded PostgreSQL {'stopped' if stopped else 'was not running'}; "
        f"data kept in {settings.data_dir / 'pgdata'}"
    )


def serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            help="Server processes on the one port; each has its own pool, limits and "
            "background rounds, and /metrics sums them all.",
        ),
    ] = 1,
    config: ConfigOption = None,
) -> None:
    """Serve the HTTP API (OpenAPI at /docs), migrating first; while the database is down it
    retries, with /readyz answering 503."""
    import uvicorn

    from lineage.api import connections
    from lineage.api.app import create_app
    from lineage.api.logs import log_config

    settings = load(config)
    url = database_url(settings)
    bind_host, bind_port = host or settings.host, port or settings.port
    settings = serving_settings(settings, bind_host)
    diagnostics.print(f"serving on http://{bind_host}:{bind_port} (API docs at /docs)")
    if settings.auth == "none":
        diagnostics.print(
            "[yellow]authentication off[/yellow] (embedded database on loopback): every "
            "request acts as tenant 'default'; LINEAGE_AUTH=keys turns keys on"
        )
    else:
        diagnostics.print("authentication: bearer keys (`lineage key create --tenant NAME`)")
    diagnostics.print(
        f"explorer: [bold]http://{bind_host}:{bind_port}/ui[/bold] (paste an answer id)"
    )
    run = functools.partial(
        uvicorn.run,
        host=bind_host,
        port=bind_port,
        log_config=log_config(settings.log_level),
        access_log=False,  # lineage.access logs each request, with its trace id
        http=connections.PROTOCOL,  # header deadline and per-address cap
        ws="none",  # no route takes a WebSocket
    )
    if workers == 1:
        run(create_app(settings, database_url=url, migrate_first=True))  # waits for the database
        return
    from lineage.api.workers import WORKER_APP, worker_environment
    from lineage.db.migrate import migrate as upgrade

    with reported():
        upgrade(url)  # once, before the workers start (each would otherwise race to)
    os.environ.update(worker_environment(settings, url, config))
    diagnostics.print(f"{workers} worker processes; /metrics sums them")
    run(WORKER_APP, factory=True, workers=workers)


def serving_settings(settings: Settings, bind_host: str) -> Settings:
    """The settings to serve with: authentication decided here, by the address actually bound
    and whether the database is the embedded one, since the app is handed a resolved URL."""
    from lineage.settings import effective_auth

    bound = settings.model_copy(update={"host": bind_host})
    return bound.model_copy(
        update={"auth": effective_auth(bound, embedded=not settings.database_url)}
    )
