"""Each function of a migrated database is its file in lineage/sql/functions/, and migrating from
empty replays each revision's functions as it first loaded them."""

from pathlib import Path

import asyncpg
import psycopg
import pytest
from alembic import command
from alembic.script import ScriptDirectory

from lineage.db.functions import FROZEN_DIR, FUNCTIONS_DIR, function_file, loadable
from lineage.db.migrate import alembic_config
from tests.private_postgres import private_postgres

# Each function as a file states it: pg_get_functiondef, then its privileges when not the
# default (PUBLIC may execute): the REVOKE from PUBLIC, and a GRANT to each other role.
DEFINITIONS = """
SELECT p.proname, pg_get_functiondef(p.oid) AS definition,
       format('public.%I(%s)', p.proname, pg_get_function_identity_arguments(p.oid)) AS signature,
       p.proacl IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM aclexplode(p.proacl) AS a WHERE a.grantee = 0)
           AS revoked,
       array(SELECT a.grantee::regrole::text FROM aclexplode(p.proacl) AS a
             WHERE a.grantee NOT IN (0, p.proowner) ORDER BY 1) AS grantees
FROM pg_proc AS p
WHERE p.pronamespace = 'public'::regnamespace
ORDER BY p.proname, pg_get_function_identity_arguments(p.oid)
"""


def statements(path: Path) -> str:
    """The file without its heading comment."""
    lines = path.read_text().splitlines(keepends=True)
    while lines and lines[0].startswith("--"):
        lines.pop(0)
    return "".join(lines)


async def test_each_function_is_its_file_and_each_file_a_function(
    owner: asyncpg.Connection,
) -> None:
    migrated: dict[str, list[str]] = {}
    for row in await owner.fetch(DEFINITIONS):
        text = row["definition"].rstrip("\n") + ";\n"
        if row["revoked"]:
            text += f"REVOKE ALL ON FUNCTION {row['signature']} FROM PUBLIC;\n"
        for grantee in row["grantees"]:
            text += f"GRANT EXECUTE ON FUNCTION {row['signature']} TO {grantee};\n"
        migrated.setdefault(row["proname"], []).append(text)
    files = {path.stem: path for path in FUNCTIONS_DIR.glob("*.sql")}
    citus = await owner.fetchval(
        "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"
    )

    assert sorted(set(migrated) - set(files)) == [], "functions without a file in sql/functions/"
    assert sorted(set(files) - set(migrated)) == [], "files in sql/functions/ without a function"
    for name, overloads in migrated.items():
        expected = loadable(statements(files[name]), app_role=True, citus=citus)
        assert expected == "\n".join(overloads), (
            f"the migrated {name} is not lineage/sql/functions/{name}.sql: a migration that "
            f"changes it edits the file and loads it (lineage/db/functions.py)"
        )


def test_only_the_newest_revision_to_load_a_function_reads_its_live_file() -> None:
    """A revision a later one overrides (or a function since dropped) loads a frozen copy."""
    scripts = ScriptDirectory.from_config(alembic_config("postgresql://")).walk_revisions()
    overridden: set[str] = set()
    frozen_needed: set[Path] = set()
    for script in scripts:  # newest first
        for name in getattr(script.module, "FUNCTIONS", ()):
            frozen = FROZEN_DIR / script.revision / f"{name}.sql"
            if name in overridden or not (FUNCTIONS_DIR / f"{name}.sql").is_file():
                assert function_file(name, script.revision) == frozen, (
                    f"revision {script.revision} loads {name}, which a later revision changes "
                    f"or drops: keep the text it loaded in lineage/migrations/functions/"
                    f"{script.revision}/{name}.sql"
                )
                frozen_needed.add(frozen)
            overridden.add(name)
    stray = sorted(str(path) for path in set(FROZEN_DIR.glob("*/*.sql")) - frozen_needed)
    assert not stray, f"frozen copies no revision needs (it would load them): {stray}"


@pytest.mark.needs_database
def test_where_there_is_no_application_role_the_functions_are_granted_to_no_one() -> None:
    """As on a server that refused CREATE ROLE: the revisions run without the role bootstrap."""
    with private_postgres() as server:  # lineage_app is cluster-wide: the shared server has it
        command.upgrade(alembic_config(server.url), "head")
        with psycopg.connect(server.url) as connection:
            granted = connection.execute(
                "SELECT proacl::text FROM pg_proc WHERE proname = 'lineage_key'"
            ).fetchone()
    assert granted == ("{postgres=X/postgres}",)
