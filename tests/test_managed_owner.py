"""`lineage migrate` as a managed PostgreSQL's database owner (README, Your own PostgreSQL): a
role that may log in and owns a fresh database, no superuser, perhaps refused CREATE ROLE. The
schema migrates from empty and the service, as lineage_app or (where it could not be made) as
the owner, appends, captures text and walks."""

import logging
from collections.abc import Iterator

import psycopg
import pytest

from lineage import db
from lineage.claims.answers import capture_texts
from lineage.db.database import Database
from lineage.db.migrate import bootstrap_roles, migrate
from lineage.services import privacy, walks
from lineage.services.auth import Caller
from lineage.services.demo import INCIDENT, load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.private_postgres import private_postgres

# Every test runs on a private server of its own.
pytestmark = pytest.mark.needs_database

OWNER = "lineage_owner"


@pytest.fixture(scope="module", params=["LOGIN", "LOGIN CREATEROLE", "LOGIN IN ROLE lineage_app"])
def owner_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A database owned by a role with those options, on a server of its own (roles are
    cluster-wide: the shared server has lineage_app already); for the last, a superuser made
    lineage_app beforehand."""
    with private_postgres() as server, psycopg.connect(server.url, autocommit=True) as admin:
        if "lineage_app" in request.param:
            admin.execute("CREATE ROLE lineage_app LOGIN")
        admin.execute(f"CREATE ROLE {OWNER} {request.param}")
        admin.execute(f"CREATE DATABASE lineage OWNER {OWNER}")
        yield f"postgresql://{OWNER}@127.0.0.1:{server.port}/lineage"


def app_role_exists(url: str) -> bool:
    with psycopg.connect(url) as connection:
        (exists,) = connection.execute(
            "SELECT to_regrole('lineage_app') IS NOT NULL"
        ).fetchone() or (False,)
    return bool(exists)


def test_the_owner_is_no_superuser(owner_url: str) -> None:
    with psycopg.connect(owner_url) as connection:
        assert connection.execute(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
        ).fetchone() == (False,)


async def test_the_owner_migrates_from_empty_and_the_service_works_as_it(owner_url: str) -> None:
    migrate(owner_url)
    pool = await db.create_pool(owner_url, max_size=2)
    try:
        async with pool.acquire() as connection:
            working_as = await connection.fetchval("SELECT session_user")
            assert working_as == (db.APP_ROLE if app_role_exists(owner_url) else OWNER)
        database = Database(pool, Settings())
        await load_incident(PostgresStore(database))
        await privacy.update_settings(
            database,
            Caller("default", None, "admin"),
            dict.fromkeys(privacy.CAPTURE_SWITCHES, True),
        )
        # The captured-text rule (lineage_captures) checks each text against its tenant's switch.
        await capture_texts(
            database, "default", {item.context_id or "": item.text for item in INCIDENT}
        )
        walked = await walks.walk_back(database, Settings(), "default", "answer_1", None)
        async with db.transaction(pool, "default") as connection:
            captured = await connection.fetchval("SELECT count(*) FROM context_text")
        # The round's statistics (lineage.services.statistics) count every tenant's records
        # through the owner's functions, whom row security confines too.
        async with pool.acquire() as connection:
            due = await connection.fetchval("SELECT lineage_statistics_due(1, 2)")
            analyzed = await connection.fetchval("SELECT lineage_analyze('provenance')")
            await connection.execute("SELECT lineage_statistics_analyzed()")
            due_after = await connection.fetchval("SELECT lineage_statistics_due(1, 2)")
    finally:
        await pool.close()
    walked_ids = {node["context_id"] for node in walked.nodes}
    assert {"answer_1", "claim_1", "summary_1", "chunk_42", "doc_contractors_v1"} <= walked_ids
    assert captured == len(INCIDENT)
    assert (due, analyzed, due_after) == (True, True, False)


async def test_migrate_and_the_pool_warn_only_where_the_service_works_as_the_owner(
    owner_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Each warning says what is so and what a superuser can do about it; none where
    lineage_app exists (made by the owner or beforehand by a superuser) and logs in."""
    caplog.set_level(logging.WARNING, logger="lineage")
    bootstrap_roles(owner_url)
    await (await db.create_pool(owner_url, max_size=1)).close()
    warnings = [record.getMessage() for record in caplog.records]
    if app_role_exists(owner_url):
        assert warnings == []
        return
    assert warnings == [
        "cannot create role lineage_app (permission denied to create role): the service will "
        f"work as {OWNER}, which owns the tables, and only the append-only trigger refuses "
        "changes to records; for a service that may only insert and select, have a superuser "
        f"run `CREATE ROLE lineage_app LOGIN; GRANT lineage_app TO {OWNER};` before this "
        "database's first `lineage migrate` (its revisions grant lineage_app its rights)",
        f"there is no role lineage_app here: working as {OWNER}, which owns the tables, so "
        "only the append-only trigger refuses changes to records (`lineage migrate` says how "
        "to make the role)",
    ]


async def test_where_lineage_app_cannot_log_in_the_pool_says_it_works_by_set_role(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with private_postgres() as server, psycopg.connect(server.url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {OWNER} LOGIN CREATEROLE")
        admin.execute(f"CREATE DATABASE lineage OWNER {OWNER}")
        owner_url = f"postgresql://{OWNER}@127.0.0.1:{server.port}/lineage"
        migrate(owner_url)
        admin.execute("ALTER ROLE lineage_app NOLOGIN")
        caplog.set_level(logging.WARNING, logger="lineage")
        pool = await db.create_pool(owner_url, max_size=1)
        try:
            working_as = await pool.fetchval("SELECT current_user")
        finally:
            await pool.close()
    assert working_as == db.APP_ROLE
    assert [record.getMessage() for record in caplog.records] == [
        'cannot log in as lineage_app (role "lineage_app" is not permitted to log in): working '
        f"as it by SET ROLE from {OWNER} instead, which a RESET ROLE would undo and Citus "
        "refuses for writes; let lineage_app log in: a password for it in ~/.pgpass or "
        "PGPASSFILE, or a pg_hba.conf rule"
    ]
