"""The `lineage` command, one module per noun; each imports what it runs only when it runs,
so that `lineage --help` starts fast.

runner: options, settings, database and event loop shared by every command
errors: the one error printer (stderr) and the "exactly one of" check
render: walks, hops and node lists on a terminal or as JSON, dot, ndjson
"""

import inspect

import typer

from lineage.cli import (
    bundle,
    claims,
    demo,
    export,
    forget,
    log,
    retention,
    server,
    signing,
    spool,
    sql,
    tenants,
    walks,
)

__all__ = ["app"]

app = typer.Typer(help="Lineage for RAG and multi-agent pipelines.", no_args_is_help=True)

for command, name in (
    (server.migrate, "migrate"),
    (server.distribute, "distribute"),
    (server.isolate, "isolate"),
    (server.stop, "stop"),
    (server.serve, "serve"),
    (demo.demo, "demo"),
    (walks.walk, "walk"),
    (walks.impact, "impact"),
    (walks.freshness, "freshness"),
    (claims.verify, "verify"),
    (signing.verify_record, "verify-record"),
    (signing.selftest, "selftest"),
    (forget.forget_source, "forget"),
    (bundle.import_bundle, "import"),
):
    app.command(name)(command)

for group, name in (
    (sql.sql_app, "sql"),
    (claims.report_app, "report"),
    (export.export_app, "export"),
    (spool.spool_app, "spool"),
    (log.log_app, "log"),
    (retention.retention_app, "retention"),
    (tenants.tenant_app, "tenant"),
    (tenants.key_app, "key"),
    (tenants.audit_app, "audit"),
    (signing.signing_key_app, "signing-key"),
):
    app.add_typer(group, name=name)


def _help_as_paragraphs(group: typer.Typer) -> None:
    """Each command's help from its docstring, one line per paragraph: typer keeps a
    docstring's line breaks in a group's command list, where they cut sentences short."""
    for info in group.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            paragraphs = inspect.cleandoc(info.callback.__doc__).split("\n\n")
            info.help = "\n\n".join(" ".join(paragraph.split()) for paragraph in paragraphs)
    for subgroup in group.registered_groups:
        if subgroup.typer_instance is not None:
            _help_as_paragraphs(subgroup.typer_instance)


_help_as_paragraphs(app)
