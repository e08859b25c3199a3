"""The schema's functions, one file each in sql/functions/ (NAME.sql, its overloads together):
the current CREATE OR REPLACE FUNCTION, then who may execute it.

A migration loads functions by name with `create(connection, revision, names)`. Migrating from
empty must replay every revision as it first ran, so when a later revision changes a file, each
earlier revision that loaded it keeps the text it loaded, frozen in
migrations/functions/REVISION/NAME.sql (the later revision's downgrade loads that copy too).
Then no revision meets a body written for a later schema: a table not made yet, another return
type (CREATE OR REPLACE cannot change it), a migration in between that calls the function.
tests/test_function_files.py fails while a revision other than the newest to load a function
would read its live file.
"""

import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from sqlalchemy import Connection

PACKAGE = Path(str(resources.files("lineage")))
FUNCTIONS_DIR = PACKAGE / "sql" / "functions"
FROZEN_DIR = PACKAGE / "migrations" / "functions"

# Where CREATE ROLE was refused (lineage.db.migrate.bootstrap_roles) there is no one to grant to.
_APP_GRANT = re.compile(r"^GRANT .* TO lineage_app;$", re.MULTILINE)
# Without the citus extension a function's `SET citus.…` is an unknown placeholder, which since
# PostgreSQL 15 only a superuser may set (a managed server's database owner may not).
_CITUS_SETTING = re.compile(r"^ *SET \"?citus\.[^\n]*\n", re.MULTILINE)


def function_file(name: str, revision: str) -> Path:
    """The text `revision` loads for function `name`: its frozen copy, else the live file."""
    frozen = FROZEN_DIR / revision / f"{name}.sql"
    return frozen if frozen.is_file() else FUNCTIONS_DIR / f"{name}.sql"


def loadable(text: str, *, app_role: bool, citus: bool) -> str:
    """`text` with its grants to lineage_app only if that role exists, and its Citus settings
    only if the citus extension is installed."""
    text = text if app_role else _APP_GRANT.sub("", text)
    return text if citus else _CITUS_SETTING.sub("", text)


def for_this_database(connection: Connection, text: str) -> str:
    """`text` as the database `connection` is on can take it (see `loadable`)."""
    app_role, citus = connection.exec_driver_sql(
        "SELECT to_regrole('lineage_app') IS NOT NULL, "
        "EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"
    ).one()
    return loadable(text, app_role=app_role, citus=citus)


def create(connection: Connection, revision: str, names: Iterable[str]) -> None:
    """(Re)create the named functions and their privileges as `revision` defines them."""
    # The driver's own cursor, without parameters: a body's `:name` or `%` is not a placeholder.
    cursor = connection.connection.cursor()
    for name in names:
        cursor.execute(for_this_database(connection, function_file(name, revision).read_text()))
