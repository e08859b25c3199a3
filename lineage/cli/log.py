"""`lineage log`: the verifiable log's checkpoints, and checks of them that trust no server."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from lineage.cli import render
from lineage.cli.errors import reported
from lineage.cli.runner import ConfigOption, console, load, run, traced
from lineage.core import DEFAULT_TENANT
from lineage.core.errors import CheckpointError

if TYPE_CHECKING:
    from lineage.settings import Settings
    from lineage.verifiable_log.checkpoint import Checkpoint, VerifierKey

T = TypeVar("T")

log_app = typer.Typer(
    help="The verifiable log: signed checkpoints, and checks of them that need no trust in the "
    "server. Records and proofs come from the database, like every command, or from the API "
    "with --url; every check runs here.",
    no_args_is_help=True,
)

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
        return run(settings, lambda database: work(DatabaseSource(database, settings, tenant_id)))

    async def main() -> T:
        import httpx

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:
            return await work(HttpSource(client))

    return traced(main)


def verifier_key(settings: Settings, key: str | None) -> VerifierKey:
    from lineage.verifiable_log.checkpoint import VerifierKey, load_signing_key

    with reported():
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


def _open_checkpoint(verifier: VerifierKey, note: str) -> Checkpoint:
    with reported():
        return verifier.open(note)


@log_app.command("key")
def log_key(config: ConfigOption = None) -> None:
    """Print the verifier key of this service's checkpoints (made on first use); publish it."""
    from lineage.verifiable_log.storage import signing_key

    print(signing_key(load(config)).verifier)


@log_app.command("checkpoint")
def log_checkpoint(
    out: Annotated[Path | None, typer.Option("--out", help="Save it to this file.")] = None,
    tenant: Annotated[str, typer.Option(help="Whose log (database only).")] = DEFAULT_TENANT,
    url: UrlOption = None,
    api_key: ApiKeyOption = None,
    config: ConfigOption = None,
) -> None:
    """Bring the log up to date and print (or save) its newest signed checkpoint. Without
    --url this signs as the service does, with the key in LINEAGE_DATA_DIR (or
    LINEAGE_LOG_SIGNING_KEY_FILE): run it where the service runs."""
    from lineage.verifiable_log import storage
    from lineage.verifiable_log.checkpoint import Checkpoint

    settings = load(config)
    if url is None:  # this machine acts as the service: its signing key must be the log's
        signed = run(settings, lambda database: storage.checkpoint(database, settings, tenant))
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
    log under a saved checkpoint, unchanged, and that each carries a valid record signature
    (checked with the keyring on this machine; with --url, the server's word). Exits 1 if any
    is not."""
    from lineage.verifiable_log.audit import verify_walk

    settings = load(config)
    verifier = verifier_key(settings, key)
    note = checkpoint.read_text()
    tenant_id = _open_checkpoint(verifier, note).tenant_id
    result = _log_run(
        settings,
        url,
        api_key,
        tenant_id,
        lambda source: verify_walk(source, verifier, note, context_id),
    )
    render.print_lines(result.lines())
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
    """Check that every checkpoint the log published since a saved older one, the newest
    included, extends it: nothing was rewritten, removed or forked. Exits 1 if one does not."""
    from lineage.verifiable_log.audit import monitor

    settings = load(config)
    verifier = verifier_key(settings, key)
    note = old.read_text()
    tenant_id = _open_checkpoint(verifier, note).tenant_id
    checked = _log_run(
        settings, url, api_key, tenant_id, lambda source: monitor(source, verifier, note)
    )
    before, after = checked.old.tree_size, checked.new.tree_size
    change = f"grew from {before} to {after}" if after > before else f"still has {before}"
    console.print(
        f"consistent: {checked.new.origin} {change} records, append-only "
        f"({checked.checked} published checkpoints checked against the saved one)",
        highlight=False,
    )
    if out is not None:
        out.write_text(checked.new_note)
        console.print(f"saved the new checkpoint to {out}")
