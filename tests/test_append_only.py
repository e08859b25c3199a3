"""Append-only, enforced by the database: the role cannot, and the trigger refuses everyone."""

import asyncpg
import pytest

from lineage import derive
from lineage.store import PostgresStore

CHANGES = [
    "UPDATE provenance SET kind = 'answer'",
    "DELETE FROM provenance",
    "TRUNCATE provenance CASCADE",
]


@pytest.fixture
async def one_record(store: PostgresStore) -> str:
    doc = await derive(store, [], "doc", "document", source_uri="s3://x")
    return doc.context_id


@pytest.mark.parametrize("statement", CHANGES)
async def test_the_application_role_cannot_change_records(
    pool: asyncpg.Pool, one_record: str, statement: str
) -> None:
    async with pool.acquire() as connection:
        assert await connection.fetchval("SELECT current_user") == "lineage_app"
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await connection.execute(statement)


@pytest.mark.parametrize("statement", CHANGES)
@pytest.mark.parametrize("replica", [False, True])
async def test_the_trigger_refuses_even_the_owner(
    owner: asyncpg.Connection, one_record: str, statement: str, replica: bool
) -> None:
    if replica:
        await owner.execute("SET session_replication_role = replica")
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
        await owner.execute(statement)
    assert await owner.fetchval("SELECT count(*) FROM provenance") == 1


async def test_the_application_role_owns_nothing(owner: asyncpg.Connection) -> None:
    owned = await owner.fetchval(
        "SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
        "WHERE r.rolname = 'lineage_app'"
    )
    assert owned == 0
    privileges = await owner.fetch(
        "SELECT privilege_type FROM information_schema.role_table_grants "
        "WHERE grantee = 'lineage_app' AND table_name = 'provenance'"
    )
    # It appends through the owner's lineage_append only.
    assert {row["privilege_type"] for row in privileges} == {"SELECT"}
