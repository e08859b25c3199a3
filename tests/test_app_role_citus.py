"""The tenant binding on Citus: the token is checked wherever a query runs, so an injected
tenant reads nothing through the coordinator, nor straight on the worker that holds the shard;
keys are minted through the definer function for the vouched tenant only."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import psycopg
import pytest

from lineage import db
from lineage.db.distribute import distribute
from lineage.db.migrate import migrate
from lineage.services import auth
from lineage.services.demo import load_incident
from lineage.store.postgres import PostgresStore
from tests.citus_cluster import CitusCluster
from tests.conftest import database_at
from tests.test_app_role import DIRECT_WRITES, hears_no_tenant_and_no_key

pytestmark = [pytest.mark.citus, pytest.mark.slow]

DATABASE = "lineage_app_role"


async def load(url: str) -> None:
    async with database_at(url, as_owner=True) as owner:
        for tenant in ("acme", "rival"):
            await auth.create_tenant(owner, tenant)
    async with database_at(url) as database:
        await load_incident(PostgresStore(database, "acme"))


@pytest.fixture(scope="module")
def citus_url(citus: CitusCluster) -> str:
    url = citus.create_database(DATABASE)
    migrate(url)
    distribute(url)
    asyncio.run(load(url))
    return url


async def as_rival_naming_acme(pool: asyncpg.Pool, query: str) -> None:
    """The rival's vouched transaction, then an injected SET LOCAL of acme, then the query."""
    async with db.transaction(pool, "rival") as connection:
        await connection.execute("SET LOCAL lineage.tenant_id = 'acme'")
        await connection.fetchval(query)


@asynccontextmanager
async def app_role_on_worker(port: int) -> AsyncIterator[asyncpg.Connection]:
    """The application role's own login on a worker, as an injection there could use it."""
    worker = await asyncpg.connect(f"postgresql://{db.APP_ROLE}@127.0.0.1:{port}/{DATABASE}")
    try:
        yield worker
    finally:
        await worker.close()


async def count_unvouched(worker: asyncpg.Connection, shard_name: str) -> None:
    """acme's tenant with a token not made under the owner's key, straight on a shard."""
    async with worker.transaction():
        await worker.execute(db.set_tenant_sql("acme", b"\x00" * 32))
        await worker.fetchval(f"SELECT count(*) FROM {shard_name}")


async def test_an_injected_tenant_reads_nothing_on_citus(
    citus_url: str, citus: CitusCluster
) -> None:
    pool = await db.create_pool(citus_url, max_size=1)
    try:
        async with db.transaction(pool, "acme") as connection:
            assert await connection.fetchval("SELECT count(*) FROM provenance") > 0
        for query in (
            "SELECT count(*) FROM provenance WHERE tenant_id = 'acme'",
            "SELECT count(*) FROM provenance",
            "SELECT count(*) FROM api_keys",
            "SELECT count(*) FROM lineage_key_create('minted', 'admin', '\\x00', '')",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="not vouched"):
                await as_rival_naming_acme(pool, query)
    finally:
        await pool.close()
    with psycopg.connect(citus_url) as coordinator:
        placements = coordinator.execute(
            "SELECT shard_name, nodeport FROM citus_shards "
            "WHERE table_name = 'provenance'::regclass"
        ).fetchall()
    assert {port for _, port in placements} == {worker.port for worker in citus.workers}
    for shard_name, port in placements:
        async with app_role_on_worker(port) as worker:
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="not vouched"):
                await count_unvouched(worker, shard_name)


async def statement_texts(connection: asyncpg.Connection, view: str) -> str:
    """Every statement text the view shows this session, or nothing if it may not read them."""
    try:
        return await connection.fetchval(f"SELECT string_agg(query, ' ') FROM {view}") or ""
    except asyncpg.InsufficientPrivilegeError:
        return ""


async def test_no_session_reads_another_sessions_token_on_any_node(
    citus_url: str, citus: CitusCluster
) -> None:
    pool = await db.create_pool(citus_url, max_size=2)
    try:
        # acme's request sits between its SET LOCAL of the tenant (sent on to the workers with
        # its first query there) and its next statement.
        async with pool.acquire() as victim, victim.transaction():
            await db.set_tenant(victim, "acme")
            await victim.fetchval("SELECT count(*) FROM provenance WHERE tenant_id = 'acme'")
            token = db.tenant_token(victim.vouching_key, "acme")
            await victim.execute(db.set_tenant_sql("acme", victim.vouching_key))
            async with pool.acquire() as injected:
                for view in ("pg_stat_activity", "citus_stat_activity"):
                    assert token not in await statement_texts(injected, view)
            for worker in citus.workers:
                async with app_role_on_worker(worker.port) as connection:
                    with pytest.raises(asyncpg.InsufficientPrivilegeError):
                        await connection.fetchval("SELECT count(*) FROM pg_stat_activity")
    finally:
        await pool.close()


async def test_records_and_the_log_are_written_only_through_the_owners_functions_on_citus(
    citus_url: str, citus: CitusCluster
) -> None:
    """What an injection could do to keep records out of the log or sign them behind the
    service's back, refused through the coordinator and straight on the shards' workers."""
    pool = await db.create_pool(citus_url, max_size=1)
    try:
        for statement in DIRECT_WRITES.values():
            async with db.transaction(pool, "acme") as connection:
                vouching_key = connection.vouching_key
                with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
                    await connection.execute(statement)
    finally:
        await pool.close()
    with psycopg.connect(citus_url) as coordinator:
        placements = coordinator.execute(
            "SELECT table_name::text, shard_name, nodeport FROM citus_shards "
            "WHERE table_name IN ('events'::regclass, 'log_heads'::regclass)"
        ).fetchall()
    assert {table for table, _, _ in placements} == {"events", "log_heads"}
    writes = {"events": "DELETE FROM {}", "log_heads": "UPDATE {} SET events_logged = 0"}
    for table, shard_name, port in placements:
        async with app_role_on_worker(port) as worker, worker.transaction():
            # acme's own vouched tenant: only the grant refuses
            await worker.execute(db.set_tenant_sql("acme", vouching_key))
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
                await worker.execute(writes[table].format(shard_name))


async def test_a_listen_on_the_coordinator_reads_no_tenants_name_and_no_revoked_key(
    citus_url: str,
) -> None:
    """Any role may LISTEN where the service does: what an injection hears on the coordinator
    names no tenant and no key, as on plain PostgreSQL."""
    async with database_at(citus_url) as database:
        await hears_no_tenant_and_no_key(citus_url, database, "heard_on_citus")
