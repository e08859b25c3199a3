"""Export bundles and their import: a tenant's signed records carried to another database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from lineage.cli.errors import diagnostics
from lineage.cli.export import export_app
from lineage.cli.log import VerifierKeyOption, verifier_key
from lineage.cli.progress import progress_bar
from lineage.cli.runner import ConfigOption, load, run
from lineage.cli.tenants import NamedTenantOption


@export_app.command("bundle")
def export_bundle(
    tenant: NamedTenantOption,
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

    settings = load(config)
    with progress_bar() as progress:
        exported = run(
            settings,
            lambda database: write_bundle(
                database, settings, tenant, output, include_text=include_text, progress=progress
            ),
            as_owner=True,
        )
    diagnostics.print(
        f"wrote {exported.records} records and {exported.texts} texts of tenant {tenant} to "
        f"{output} (checkpoint of {exported.tree_size} records"
        + (f"; {exported.expired} expired, as leaf hashes only)" if exported.expired else ")"),
        highlight=False,
    )


def import_bundle(
    bundle_file: Annotated[
        Path, typer.Argument(help="A bundle from `lineage export bundle`.", dir_okay=False)
    ],
    tenant: NamedTenantOption,
    key: VerifierKeyOption = None,
    config: ConfigOption = None,
) -> None:
    """Verify a bundle against its signed checkpoint and Merkle tree, then write it into a new
    or empty tenant in one transaction: all or nothing. Exits 1, writing nothing, if a record
    is missing, added, reordered or altered. As the database owner."""
    from lineage.bundle.load import import_bundle as load_bundle

    settings = load(config)
    verifier = verifier_key(settings, key)
    with progress_bar() as progress:
        imported = run(
            settings,
            lambda database: load_bundle(
                database, settings, bundle_file, tenant, verifier, progress
            ),
            as_owner=True,
        )
    checked = imported.verified
    print(
        json.dumps(
            {
                "tenant_id": imported.tenant_id,
                "from_tenant": checked.header.tenant_id,
                "records": checked.records,
                "expired": checked.expired,
                "tombstones": checked.tombstones,
                "expired_before": (
                    None if checked.expired_before is None else checked.expired_before.isoformat()
                ),
                "texts": checked.texts,
                "kinds": checked.kinds,
                "signatures_checked": checked.signatures_checked,
                "signatures_unchecked": checked.signatures_unchecked,
                "unsigned": checked.unsigned,
                "tree_size": imported.tree_size,
                "seconds": {phase: round(took, 3) for phase, took in imported.seconds.items()},
            }
        )
    )
    diagnostics.print(
        f"imported {checked.records} records into tenant {tenant}, verified against the "
        f"bundle's checkpoint of {checked.checkpoint.tree_size} records"
        + (f" ({checked.expired} expired before the export)" if checked.expired else ""),
        highlight=False,
    )
