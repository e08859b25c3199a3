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
    try:
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute(BOOTSTRAP_SQL.read_text())
    except psycopg.errors.InsufficientPrivilege:
        log.warning(
            "cannot create role lineage_app here; only the append-only trigger protects "
            "provenance (grant INSERT and SELECT to a dedicated role by hand to restore it)"
        )
        return False
    return True


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
