"""Migration 0032: records stored before postings existed (0028) get them, equal to what the
append gives the same records, and invalidation answers from them alone. Migration 0034: the
postings table it fills from them answers what the walk answers."""

import uuid
from collections.abc import Iterator

import asyncpg
import psycopg
import pytest

from lineage.core.derive import derive_many
from lineage.db.migrate import downgrade, migrate
from lineage.store.postgres import PostgresStore
from tests.conftest import database_at, janitor, server_url, url_for
from tests.test_postings import QUESTIONS, answers, random_dag, store_without_postings
from tests.walks_helpers import run_sql

pytestmark = pytest.mark.needs_database

POSTINGS = "SELECT context_id, upstream_keys, upstream_depths FROM provenance ORDER BY context_id"
# The same at the newest revision, which keeps the keys by number (migration 0038).
NAMED_POSTINGS = """
SELECT p.context_id,
       ARRAY(SELECT k.key FROM unnest(p.upstream_keys) WITH ORDINALITY AS u (key_no, o)
             JOIN invalidation_keys AS k ON k.tenant_id = p.tenant_id AND k.key_no = u.key_no
             ORDER BY u.o),
       p.upstream_depths
FROM provenance AS p ORDER BY p.context_id
"""


@pytest.fixture
def fresh() -> Iterator[str]:
    """A database at the newest revision: records are appended there (the append's arguments
    are this checkout's), then the schema goes down to the revision a test starts from."""
    base = server_url()
    name = f"lineage_backfill_{uuid.uuid4().hex[:8]}"
    with janitor(base, name, None):
        url = url_for(base, name)
        migrate(url)
        yield url


def postings_dropped(url: str) -> None:
    """Every record as a release before 0028 stored it: no postings (the owner's UPDATE and the
    append-only trigger set aside, as only a superuser could)."""
    with psycopg.connect(url) as superuser:
        superuser.execute("ALTER TABLE provenance DISABLE TRIGGER provenance_append_only")
        superuser.execute("UPDATE provenance SET upstream_keys = NULL, upstream_depths = NULL")
        superuser.execute("ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_append_only")


async def test_older_records_get_the_postings_the_append_gives(fresh: str) -> None:
    async with database_at(fresh) as database:
        await derive_many(PostgresStore(database), random_dag(7, 400))
    downgrade(fresh, "0031")  # the revision before the backfill
    at_0031 = fresh
    with psycopg.connect(at_0031) as owner:
        appended = owner.execute(POSTINGS).fetchall()
    assert sum(1 for row in appended if row[1]) > 300
    postings_dropped(at_0031)
    migrate(at_0031)
    with psycopg.connect(at_0031) as owner:
        filled = owner.execute(NAMED_POSTINGS).fetchall()
        unknown = owner.execute("SELECT count(*) FROM provenance WHERE upstream_keys IS NULL")
        assert unknown.fetchone() == (0,)
        # Put back as they were: the trigger refuses, forced row security holds.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            owner.execute("UPDATE provenance SET upstream_keys = NULL")
    as_set = {row[0]: dict(zip(row[1], row[2], strict=True)) for row in appended}
    assert {row[0]: dict(zip(row[1], row[2], strict=True)) for row in filled} == as_set
    pool = await asyncpg.create_pool(at_0031, min_size=1, max_size=1)
    try:
        name, start = QUESTIONS[0]
        rows = await run_sql(pool, name, tenant_id="default", kind="any", max_depth=20, **start)
        assert rows
    finally:
        await pool.close()


async def test_the_postings_table_filled_by_migration_answers_what_the_walk_answers(
    fresh: str,
) -> None:
    async with database_at(fresh) as database:
        await derive_many(PostgresStore(database), random_dag(4, 300))
    downgrade(fresh, "0033")  # the revision before the postings table
    at_0033 = fresh
    migrate(at_0033)
    pool = await asyncpg.create_pool(at_0033, min_size=1, max_size=1)
    try:
        by_postings = await answers(pool)
        assert any(rows for rows in by_postings.values())
        async with pool.acquire() as owner:
            await store_without_postings(owner)  # the tenant is walked from now on
        by_walk = await answers(pool)
    finally:
        await pool.close()
    for question, rows in by_walk.items():
        assert by_postings[question] == rows, question
