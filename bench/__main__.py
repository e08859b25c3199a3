"""`python -m bench` (from the checkout): walks and ingest timed against the baselines on a
synthetic RAG DAG; writes a report. bench/ is not part of the installed package."""

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from bench.classic import ClassicTableError, quoted_table
from bench.dag import parse_size
from bench.run import Plan, run
from lineage.cli.progress import progress_bar

BENCH_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


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
    config: Annotated[
        Path | None, typer.Option("--config", help="A .env-style file of LINEAGE_* settings.")
    ] = None,
    classic_table: Annotated[
        str | None,
        typer.Option(
            "--classic-table",
            help="Time this SCHEMA.TABLE in the classic schema (id, parent_ids, kind, "
            "content_hash, transform, version, source_uri, snapshot, created_at) instead of "
            "the generated DAG (--size is then ignored); `python -m bench.classic` writes one.",
        ),
    ] = None,
    classic_url: Annotated[
        str | None,
        typer.Option(help="The database holding --classic-table (default: --server-url)."),
    ] = None,
) -> None:
    """Benchmark walks and ingest against the baselines on a synthetic RAG DAG (or a classic
    table of your own); write a report."""
    from rich.console import Console

    try:
        parse_size(size)
        if classic_table:
            quoted_table(classic_table)
    except ValueError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    if server_url == "embedded":
        from lineage.db.embedded import start_embedded
        from lineage.settings import load_settings

        server_url = start_embedded(load_settings(config).data_dir)
    plan = Plan(
        size=size,
        server_url=server_url,
        reuse=reuse,
        startup=startup,
        load_seconds=load_seconds,
        output=output,
        classic_table=classic_table,
        classic_url=classic_url,
    )
    try:
        with progress_bar() as progress:
            report = asyncio.run(run(plan, progress))
    except ClassicTableError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    console = Console()
    console.print(report.table())
    console.print(f"wrote {output}")


if __name__ == "__main__":
    typer.run(bench)
