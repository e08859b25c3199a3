"""Schema by migration only: the role bootstrap, then alembic's revisions in migrations/."""

import logging
from importlib import resources
from pathlib import Path

import psycopg
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationInfo
from alembic.script import ScriptDirectory

from lineage.core.progress import Progress, unwatched

PACKAGE = Path(str(resources.files("lineage")))
MIGRATIONS_DIR = PACKAGE / "migrations"
BOOTSTRAP_SQL = PACKAGE / "sql" / "bootstrap" / "roles.sql"

log = logging.getLogger(__name__)


def sqlalchemy_url(url: str) -> str:
    return "postgresql+psycopg://" + url.split("://", 1)[1]


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    return config


def bootstrap_roles(url: str) -> bool:
    """Create the application role if it is missing (roles are cluster-wide, so not a revision).

    Returns False on a managed Postgres that refuses CREATE ROLE: then only the append-only
    trigger protects the table, and the service works as the connecting user.
    """
    with psycopg.connect(url, autocommit=True) as connection:
        try:
            connection.execute(BOOTSTRAP_SQL.read_text())
        except psycopg.errors.InsufficientPrivilege as exc:
            user, exists = connection.execute(
                "SELECT current_user, to_regrole('lineage_app') IS NOT NULL"
            ).fetchone() or ("", False)
            refusal = exc.diag.message_primary
            log.warning(_BOOTSTRAP_REFUSED[exists].format(refusal=refusal, user=user))
            return False
    return True


# What a refused bootstrap leaves, by whether lineage_app exists, and what a superuser can do.
_BOOTSTRAP_REFUSED = {
    False: (
        "cannot create role lineage_app ({refusal}): the service will work as {user}, which "
        "owns the tables, and only the append-only trigger refuses changes to records; for a "
        "service that may only insert and select, have a superuser run `CREATE ROLE "
        "lineage_app LOGIN; GRANT lineage_app TO {user};` before this database's first "
        "`lineage migrate` (its revisions grant lineage_app its rights)"
    ),
    True: (
        "cannot make lineage_app a login role with {user} as its member ({refusal}): the "
        "service works as lineage_app only if it can log in as it; have a superuser run "
        "`ALTER ROLE lineage_app LOGIN; GRANT lineage_app TO {user};`"
    ),
}


def migrate(url: str, revision: str = "head", progress: Progress = unwatched) -> None:
    """Upgrade to `revision`, saying after each step how far along the revisions it is."""
    bootstrap_roles(url)
    config = alembic_config(url)
    revisions = [script.revision for script in ScriptDirectory.from_config(config).walk_revisions()]
    revisions.reverse()  # oldest first

    def applied(*, step: MigrationInfo, **_: object) -> None:
        done = revisions.index(step.up_revision_id) + 1 if step.up_revision_id in revisions else 0
        progress("migrate", done, len(revisions), detail=str(step.up_revision_id))

    config.attributes["on_version_apply"] = (applied,)  # read by migrations/env.py
    command.upgrade(config, revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)
