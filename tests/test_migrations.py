"""Schema by migration only: the newest revision downgrades cleanly and upgrades again."""

import subprocess
from pathlib import Path

import asyncpg

from lineage.db.migrate import downgrade, migrate


def schema(url: str) -> str:
    # pg_dump must match the server's major version; compare catalogue rows instead.
    import psycopg

    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = 'public' "
            "ORDER BY 1, 2"
        ).fetchall()
        indexes = connection.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"
        ).fetchall()
        triggers = connection.execute(
            "SELECT tgname, tgenabled FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1"
        ).fetchall()
    return repr((rows, indexes, triggers))


async def test_downgrade_then_upgrade_restores_the_schema(
    database_url: str, owner: asyncpg.Connection
) -> None:
    before = schema(database_url)
    assert "provenance_parent_ids" in before and "'A'" in before  # triggers enabled ALWAYS
    downgrade(database_url, "base")
    tables = await owner.fetchval(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' "
        "AND table_name <> 'alembic_version'"
    )
    assert tables == 0
    migrate(database_url)
    assert schema(database_url) == before


def test_every_cli_command_has_help() -> None:
    from typer.main import get_command

    from lineage.cli import app

    root = get_command(app)
    commands = getattr(root, "commands", {})
    assert {"demo", "serve", "migrate", "walk", "impact", "freshness", "sql", "stop"} <= set(
        commands
    )
    for name, command in commands.items():
        assert command.help, f"lineage {name} has no help text"
        for sub_name, sub in getattr(command, "commands", {}).items():
            assert sub.help, f"lineage {name} {sub_name} has no help text"
    done = subprocess.run(
        ["lineage", "--help"], capture_output=True, text=True, check=True, timeout=60
    )
    assert "demo" in done.stdout


def test_each_checkout_has_its_own_embedded_test_server(tmp_path: Path) -> None:
    from tests.conftest import EMBEDDED_TEST_DIR, embedded_test_dir

    assert embedded_test_dir(tmp_path / "a") != embedded_test_dir(tmp_path / "b")
    assert embedded_test_dir(Path(__file__).parent.parent) == EMBEDDED_TEST_DIR
    assert Path("/tmp/lineage-test-embedded") != EMBEDDED_TEST_DIR
