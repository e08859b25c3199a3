"""Signed records: the signing keyring, one record's signature check, and the self-test."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from lineage.cli import render
from lineage.cli.errors import reported
from lineage.cli.runner import ConfigOption, TenantOption, console, database_url, load, run
from lineage.core import DEFAULT_TENANT

if TYPE_CHECKING:
    from lineage.db.database import Database
    from lineage.services.signing import SignatureCheck

signing_key_app = typer.Typer(
    help="The keyring whose HMAC-SHA256 keys sign each record; it lives outside the database.",
    no_args_is_help=True,
)


@signing_key_app.command("rotate")
def signing_key_rotate(config: ConfigOption = None) -> None:
    """Add a newer key: new records are signed with it, the older keys still verify.
    Restart the service (every replica, with the same file) to sign with it."""
    from lineage.db.keyring import keyring_path, rotate_keyring

    path = keyring_path(load(config))
    with reported():
        added = rotate_keyring(path)
    console.print(
        f"added signing key {added.key_id} to {path}; restart the service (every replica, with "
        "this file) so that new records are signed with it",
        highlight=False,
    )


@signing_key_app.command("list")
def signing_key_list(config: ConfigOption = None) -> None:
    """The keyring's key ids, oldest first, the signing one marked; never the secrets."""
    from lineage.db.keyring import keyring_path, read_keyring

    path = keyring_path(load(config))
    with reported():
        keys = read_keyring(path) if path.exists() else []
    if not keys:
        console.print(f"no signing keyring at {path} yet: the first record signed makes one")
        return
    table = render.table("key id", "created", "signs new records", title=str(path))
    for key in keys:
        table.add_row(key.key_id, key.created_at, "yes" if key is keys[-1] else "")
    console.print(table)


def verify_record(
    context_id: Annotated[str, typer.Argument(help="The record whose signature to check.")],
    tenant: TenantOption = DEFAULT_TENANT,
    output: Annotated[str, typer.Option("--format", help="text or json.")] = "text",
    config: ConfigOption = None,
) -> None:
    """Check a record's stored row against its stored signature: signed, verified, reason (ok,
    unsigned, mismatch, unknown_key). Exits 1 unless verified."""
    from lineage.db import keyring
    from lineage.services import records

    settings = load(config)

    async def work(database: Database) -> SignatureCheck:
        # The keyring must exist: verifying never makes one (it would verify nothing).
        signer = keyring.load_keyring(keyring.keyring_path(settings), create=False)
        return await records.verify_stored(database, tenant, context_id, signer)

    check = run(settings, work)
    if output == "json":
        print(json.dumps({"context_id": context_id, **check.model_dump(mode="json")}))
    else:
        console.print(
            f"{context_id}: signed {str(check.signed).lower()}, verified "
            f"{str(check.verified).lower()}, key {check.key_id or '-'}, reason {check.reason}",
            highlight=False,
        )
    if not check.verified:
        raise typer.Exit(1)


def selftest(config: ConfigOption = None) -> None:
    """Show the signing cycle on a throwaway database that it creates on the configured server
    and drops: build, sign, store, read back, verify, alter as the owner, verify false. The
    configured database's data is never touched. Exits 1 if a step fails."""
    from rich.markup import escape

    from lineage.db.keyring import signer_for
    from lineage.services.selftest import run_selftest

    settings = load(config)
    with reported():
        signer = signer_for(settings)

    def report(ok: bool, text: str) -> None:
        mark = "[green]✓[/green]" if ok else "[red]✗[/red]"
        console.print(f"{mark} {escape(text)}", highlight=False)

    if not run_selftest(settings, database_url(settings), signer, report):
        raise typer.Exit(1)
