"""Tenants, their bearer keys, their capture switches and their audit log."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from lineage.cli import render
from lineage.cli.errors import diagnostics, fail
from lineage.cli.runner import ConfigOption, console, load, run

if TYPE_CHECKING:
    pass

tenant_app = typer.Typer(help="Tenants: each one's records are invisible to the others.")
key_app = typer.Typer(help="Bearer keys, scoped ingest | read | admin; only hashes are kept.")
audit_app = typer.Typer(help="Who walked, exported, verified or forgot what, and when.")
NamedTenantOption = Annotated[str, typer.Option("--tenant", help="The tenant's name.")]


@tenant_app.command("create")
def tenant_create(name: str, config: ConfigOption = None) -> None:
    """Create a tenant (as the database owner; the service's role cannot)."""
    from lineage.services import auth

    created = run(load(config), lambda database: auth.create_tenant(database, name), as_owner=True)
    console.print(f"tenant {name} " + ("created" if created else "exists already"))


@tenant_app.command("token")
def tenant_token(name: str, config: ConfigOption = None) -> None:
    """Print the token that vouches for a tenant as lineage_app in psql (SET LOCAL
    lineage.tenant_token), read as the owner: lineage_app itself cannot make one."""
    from lineage.services import auth

    made = run(load(config), lambda database: auth.tenant_token(database, name), as_owner=True)
    if made is None:
        raise fail("this database has no tenant vouching key yet: run `lineage migrate`")
    print(made)


@tenant_app.command("rotate-vouching-key")
def tenant_rotate_vouching_key(config: ConfigOption = None) -> None:
    """Replace the key tenant tokens are made with (as the owner), if one may have leaked:
    restart the service after it (on Citus, run `lineage distribute` too)."""
    from lineage.services import auth

    run(load(config), auth.rotate_vouching_key, as_owner=True)
    console.print(
        "tenant vouching key replaced: restart the service (on Citus: lineage distribute)"
    )


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
        shown = run(load(config), lambda database: privacy.get_settings(database, name))
    else:
        shown = run(
            load(config), lambda database: privacy.update_settings(database, caller, changes)
        )
    table = render.table("switch", "captures", title=f"tenant {name}")
    for switch in privacy.CAPTURE_SWITCHES:
        table.add_row(switch, "on" if getattr(shown, switch) else "off")
    console.print(table)


@key_app.command("create")
def key_create(
    tenant: NamedTenantOption,
    scope: Annotated[str, typer.Option("--scope", help="ingest, read, verify or admin.")] = "read",
    label: Annotated[str | None, typer.Option("--label", help="What the key is for.")] = None,
    config: ConfigOption = None,
) -> None:
    """Create a key and print it once; store it now, it cannot be shown again."""
    from lineage.services import auth

    token, row = run(load(config), lambda database: auth.create_key(database, tenant, scope, label))
    console.print(f"key {row['key_id']} ({row['scope']}) for tenant {tenant}; shown once:")
    print(token)


@key_app.command("list")
def key_list(tenant: NamedTenantOption, config: ConfigOption = None) -> None:
    """The tenant's keys (ids, scopes, labels; never secrets)."""
    from lineage.services import auth

    rows = run(load(config), lambda database: auth.list_keys(database, tenant))
    table = render.table("key id", "scope", "label", "created", "revoked")
    for row in rows:
        table.add_row(
            row["key_id"], row["scope"], row["label"] or "", str(row["created_at"]),
            str(row["revoked_at"] or ""),
        )  # fmt: skip
    console.print(table)


@key_app.command("revoke")
def key_revoke(key_id: str, tenant: NamedTenantOption, config: ConfigOption = None) -> None:
    """Revoke a key: the next request with it gets 401."""
    from lineage.services import auth

    run(load(config), lambda database: auth.revoke_key(database, tenant, key_id))
    console.print(f"key {key_id} revoked")


@audit_app.command("list")
def audit_list(
    ctx: typer.Context,
    tenant: NamedTenantOption,
    since: Annotated[str, typer.Option("--since", help="An ISO time.")] = "1970-01-01T00:00:00Z",
    limit: Annotated[int, typer.Option("--limit", help="At most this many a page.")] = 100,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="The page after the one that named it.")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """The tenant's audit records, oldest first, one JSON object per line, a page at a time:
    the command for the next page goes to stderr."""
    from datetime import datetime

    from lineage.services import audit

    start = datetime.fromisoformat(since)
    page = run(load(config), lambda database: audit.entries(database, tenant, start, limit, cursor))
    for row in page["entries"]:
        print(json.dumps(row, default=str))
    if page["next"] is not None:
        more = render.command_line(ctx, cursor=page["next"])
        diagnostics.print(f"more: {more}", highlight=False, soft_wrap=True)


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
        raise fail(f"{typed!r} is not {name!r}: nothing deleted", 2)
    receipt = run(load(config), lambda database: delete_tenant(database, name), as_owner=True)
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
    rows = run(
        load(config), lambda database: operator_entries(database, start, limit), as_owner=True
    )
    for row in rows:
        print(json.dumps(row, default=str))
