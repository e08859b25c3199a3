"""The command line as a package: light to start, every tenant's data reachable by --tenant."""

import json
import subprocess
import sys

from typer.main import get_command
from typer.testing import CliRunner

from lineage.cli import app

# Commands that read or write no one tenant's data (or name it otherwise: a tenant argument,
# a checkpoint's origin, every spooled tenant); every other command must take --tenant.
NO_TENANT_OPTION = {
    "migrate", "distribute", "isolate", "stop", "serve", "selftest", "sql show", "sql list",
    "spool status",
    "log key", "log verify", "log monitor", "signing-key rotate", "signing-key list",
    "tenant create", "tenant settings", "tenant token", "tenant rotate-vouching-key",
    "tenant delete", "audit operator", "retention show", "retention set", "retention apply",
}  # fmt: skip


def commands() -> dict[str, object]:
    found: dict[str, object] = {}
    for name, command in getattr(get_command(app), "commands", {}).items():
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            found[name] = command
        for sub_name, sub in (subcommands or {}).items():
            found[f"{name} {sub_name}"] = sub
    return found


def test_every_command_touching_tenant_data_takes_tenant() -> None:
    missing = [
        name
        for name, command in commands().items()
        if name not in NO_TENANT_OPTION
        and not any("--tenant" in param.opts for param in getattr(command, "params", []))
    ]
    assert missing == []
    assert set(commands()) >= NO_TENANT_OPTION


def test_importing_the_cli_loads_no_database_driver_and_no_bench() -> None:
    probe = (
        "import sys; before = list(sys.path); import lineage.cli; "
        "heavy = {'asyncpg', 'pydantic', 'httpx', 'fastapi', 'bench', 'lineage.store'}; "
        "print(sorted(heavy & set(sys.modules)), sys.path == before)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["[]", "True"], done.stdout + done.stderr


def test_read_commands_answer_for_the_tenant_given(database_url: str) -> None:
    env = {"LINEAGE_DATABASE_URL": database_url, "COLUMNS": "200"}

    def lineage(*args: str, code: int = 0) -> str:
        result = CliRunner().invoke(app, list(args), env=env)
        assert result.exit_code == code, (args, result.output, result.exception)
        return result.stdout

    lineage("tenant", "create", "acme")
    lineage("demo", "--tenant", "acme")
    acme = ("--tenant", "acme")
    walked = json.loads(lineage("walk", "answer_1", "--format", "json", *acme))
    assert len(walked["nodes"]) == 8
    assert "no context answer_1" in CliRunner().invoke(app, ["walk", "answer_1"], env=env).output
    contractors = ("--source-uri", "s3://policies/contractors.md", "--format", "ndjson")
    assert len(lineage("impact", *contractors, *acme).splitlines()) > 1
    assert len(lineage("impact", *contractors).splitlines()) == 1  # the summary alone
    assert lineage("freshness", "--format", "ndjson", *acme) != lineage(
        "freshness", "--format", "ndjson"
    )
    assert json.loads(lineage("verify", "answer_1", "--format", "json", *acme))["claims"]
    assert lineage("report", "claims", "--format", "ndjson", *acme)
    assert lineage("report", "claims", "--format", "ndjson") == ""
    document = json.loads(lineage("export", "prov", "answer_1", *acme))
    assert document["entity"]
    header = json.loads(lineage("export", "header", "answer_1", "--format", "json", *acme))
    assert "answer_1" in json.dumps(header)
    rows = lineage("sql", "run", "walk_back", "-v", "context_id=answer_1", "-v", "max_depth=9",
                   *acme)  # fmt: skip
    assert len(rows.splitlines()) == len(walked["nodes"])
    refused = CliRunner().invoke(
        app, ["sql", "run", "server_version", "-v", "tenant_id=x", *acme], env=env
    )
    assert refused.exit_code == 2 and "different tenants" in refused.output


def test_an_unknown_format_is_refused() -> None:
    for args in (["walk", "x", "--format", "yaml"], ["impact", "--context-id", "x",
                                                         "--format", "xml"]):  # fmt: skip
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and "--format must be one of" in result.output
