"""`lineage export`: a context's provenance as W3C PROV, or as a generated file's header."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from lineage.cli.errors import fail, reported
from lineage.cli.progress import progress_bar
from lineage.cli.runner import ConfigOption, DepthOption, TenantOption, load, run
from lineage.core import DEFAULT_TENANT

export_app = typer.Typer(
    help="Export provenance: W3C PROV documents, headers for generated files.",
    no_args_is_help=True,
)


@export_app.command("prov")
def export_prov(
    context_id: Annotated[str, typer.Argument(help="The context whose walk-back to export.")],
    output: Annotated[str, typer.Option("--format", help="json, provn, jsonld or xml.")] = "json",
    max_depth: DepthOption = None,
    tenant: TenantOption = DEFAULT_TENANT,
    config: ConfigOption = None,
) -> None:
    """A context's walk-back as a W3C PROV document: contexts as entities, transforms as
    activities, produced_by as agents."""
    from lineage.interop import prov
    from lineage.services import walks

    if output not in prov.MEDIA_TYPES:
        raise fail(f"--format must be one of {', '.join(prov.MEDIA_TYPES)}", 2)
    settings = load(config)
    with progress_bar() as progress:
        progress("walk back")
        found = run(
            settings,
            lambda database: walks.walk_back(database, settings, tenant, context_id, max_depth),
        )
        progress("walk back", len(found.nodes), len(found.nodes))
        progress(f"write PROV ({output})")
        with reported():
            document = prov.written(found, tenant, output)
    print(document)


@export_app.command("header")
def export_header(
    context_id: Annotated[str, typer.Argument(help="The answer (or any context) to describe.")],
    output: Annotated[
        str, typer.Option("--format", help="yaml (front-matter) or json (envelope).")
    ] = "yaml",
    tenant: TenantOption = DEFAULT_TENANT,
    config: ConfigOption = None,
) -> None:
    """Provenance for a generated file: trace id, operation, provider, model, inputs
    fingerprint, generated time, the ids it consumed, and its request, service-call and
    transport layers from the trace's spans."""
    from lineage.interop import headers

    if output not in {"yaml", "json"}:
        raise fail("--format must be yaml or json", 2)
    settings = load(config)
    header = run(settings, lambda database: headers.provenance_header(database, tenant, context_id))
    if output == "json":
        print(json.dumps(headers.envelope(header), indent=2))
    else:
        print(headers.front_matter(header), end="")
