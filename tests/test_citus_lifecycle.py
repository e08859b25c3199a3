"""The data lifecycle on Citus (tests/citus_cluster.py, default settings, after `lineage
distribute`): `lineage tenant delete` leaves no row of the tenant on any shard and the other
tenant whole; export then import gives the same walks; retention drops a month's partitions on
every worker; the coordinator's dump, restored and distributed again, verifies (the backup
runbook's Citus steps)."""

import asyncio
import json
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import psycopg
import pytest
from typer.testing import CliRunner

from lineage import cli, db
from lineage.db.database import Database
from lineage.db.distribute import distribute
from lineage.db.migrate import downgrade, migrate
from lineage.services import auth, reads, retention, walks
from lineage.services.appends import insert_records
from lineage.services.demo import ANSWER_ID, load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from lineage.verifiable_log import storage
from tests.citus_cluster import PG15_BIN, CitusCluster
from tests.conftest import database_at
from tests.test_backup import posture
from tests.test_retention import NEW_RECORDS, OLD, OLD_MONTH, OLD_RECORDS
from tests.test_tenant_deletion import fill_tenant, rows_per_table

pytestmark = [pytest.mark.citus, pytest.mark.slow]


@pytest.fixture(scope="module")
def citus_url(citus: CitusCluster) -> str:
    url = citus.create_database("lineage_citus_lifecycle")
    migrate(url)
    distribute(url)
    return url


async def _pools(url: str) -> tuple[Database, Database]:
    """The owner's Database and the application role's."""
    settings = Settings()
    owner = await Database.connect(settings, url, max_size=2, as_owner=True)
    return owner, await Database.connect(settings, url, max_size=2)


async def _rows(url: str, tenant_id: str) -> dict[str, int]:
    """Rows of the tenant in every table with a tenant_id column, found by catalog (the
    parents: partitions are in them; Citus's shards are behind the distributed tables)."""
    owner = await asyncpg.connect(url)
    try:
        return await rows_per_table(owner, tenant_id)
    finally:
        await owner.close()


async def _fill_two(url: str) -> None:
    owner, database = await _pools(url)
    try:
        for tenant in ("doomed", "kept"):
            await fill_tenant(database, owner, tenant)
    finally:
        await database.close()
        await owner.close()


def test_lineage_tenant_delete_on_citus_leaves_nothing_of_the_tenant(citus_url: str) -> None:
    asyncio.run(_fill_two(citus_url))
    doomed, kept = (asyncio.run(_rows(citus_url, tenant)) for tenant in ("doomed", "kept"))
    assert [table for table, count in doomed.items() if count == 0] == [
        "tenant_deleting",
    ], "the fixture leaves a table unfilled"

    env = {"LINEAGE_DATABASE_URL": citus_url}
    deleted = CliRunner().invoke(
        cli.app, ["tenant", "delete", "doomed", "--confirm", "doomed"], env=env
    )
    assert deleted.exit_code == 0, deleted.output
    receipt = json.loads(deleted.stdout)
    assert receipt["rows"] == {t: n for t, n in doomed.items() if t != "tenant_deleting"}
    assert set(asyncio.run(_rows(citus_url, "doomed")).values()) == {0}
    assert asyncio.run(_rows(citus_url, "kept")) == kept
    audited = CliRunner().invoke(cli.app, ["audit", "operator"], env=env)
    assert '"action": "tenant_delete"' in audited.stdout and '"target": "doomed"' in audited.stdout


def test_export_then_import_on_citus_gives_the_same_walks(citus_url: str, tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"LINEAGE_DATABASE_URL": citus_url, "LINEAGE_DATA_DIR": str(tmp_path)}

    async def prepare() -> None:
        owner, pool = await _pools(citus_url)
        try:
            await auth.create_tenant(owner, "source")
            await load_incident(PostgresStore(pool, "source"))
        finally:
            await pool.close()
            await owner.close()

    asyncio.run(prepare())
    path = tmp_path / "source.bundle"
    written = runner.invoke(
        cli.app, ["export", "bundle", "--tenant", "source", "--output", str(path)], env=env
    )
    assert written.exit_code == 0, written.output
    loaded = runner.invoke(cli.app, ["import", str(path), "--tenant", "moved"], env=env)
    assert loaded.exit_code == 0, loaded.output
    assert json.loads(loaded.stdout)["tenant_id"] == "moved"

    async def walk_both() -> tuple[list[Any], list[Any]]:
        settings = Settings()
        pool = await Database.connect(settings, citus_url, max_size=2)
        try:
            found = []
            for tenant in ("source", "moved"):
                walked = await walks.walk_back(pool, settings, tenant, ANSWER_ID, None)
                found.append(sorted((n["context_id"], n["depth"], n["kind"]) for n in walked.nodes))
            return found[0], found[1]
        finally:
            await pool.close()

    source, moved = asyncio.run(walk_both())
    assert source == moved and len(source) > 5
    # The moved tenant keeps the source's text hash key, its own first key retired.
    with psycopg.connect(citus_url) as coordinator:
        keys = coordinator.execute(
            "SELECT tenant_id, text_hash_key FROM tenant_text_keys "
            "WHERE tenant_id IN ('source', 'moved') ORDER BY tenant_id"
        ).fetchall()
    assert [tenant for tenant, _ in keys] == ["moved", "source"] and keys[0][1] == keys[1][1]


def test_a_period_closes_the_open_partition_on_citus(citus_url: str) -> None:
    """With records stored (the tests above), setting a period closes every table's open
    partition on the shards too; the records stay readable and appends go on."""

    async def shape() -> tuple[list[str], walks.Walk]:
        owner, pool = await _pools(citus_url)
        try:
            await retention.set_policy(owner, 12)
            policy = await retention.get_policy(owner)
            async with pool.tenant("kept") as tx:
                await insert_records(tx, NEW_RECORDS[1:])
            walked = await walks.walk_back(pool, Settings(), "kept", ANSWER_ID, None)
            await retention.set_policy(owner, 0)
            return policy["partitions"], walked
        finally:
            await pool.close()
            await owner.close()

    partitions, walked = asyncio.run(shape())
    assert partitions[0].startswith("provenance_p_until_") and len(partitions) == 3
    assert len(walked.nodes) > 5 and not walked.truncated
    assert asyncio.run(_rows(citus_url, "kept"))["provenance"] > 10


def test_retention_drops_a_month_on_citus(citus: CitusCluster) -> None:
    url = citus.create_database("lineage_citus_retention")
    migrate(url)
    distribute(url)

    async def expire() -> tuple[dict[str, object], walks.Walk]:
        owner, pool = await _pools(url)
        try:
            await retention.set_policy(owner, 12)  # month partitions: the open one was empty
            # On Citus an append cannot write shards the owner made in its own transaction: the
            # months' partitions come first, as the service's schedule adds them ahead.
            async with owner.connection() as connection:
                await db.fetch(
                    connection, "partitions_add", from_time=OLD, through=OLD + timedelta(days=1)
                )
            for batch in (OLD_RECORDS, NEW_RECORDS):
                async with pool.tenant("default") as tx:
                    await insert_records(tx, batch)
            await storage.checkpoint(pool, Settings(), "default")  # the log takes them in first
            receipt = await retention.apply(pool)
            walked = await walks.walk_back(pool, Settings(), "default", "answer_new", None)
            return receipt, walked
        finally:
            await pool.close()
            await owner.close()

    receipt, walked = asyncio.run(expire())
    assert receipt["tombstones_kept"] == 1
    assert walked.truncated_reason == "retention"
    assert [node["context_id"] for node in walked.nodes] == ["answer_new"]
    with psycopg.connect(url) as coordinator:
        left = coordinator.execute(
            "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::regclass::text = ANY (%s)",
            ([f"{table}_p{OLD_MONTH}" for table in db.PARTITIONED],),
        ).fetchone()
        shards = coordinator.execute(
            "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid::regclass::text LIKE %s",
            (f"%_p{OLD_MONTH}",),
        ).fetchone()
    assert left == (0,) and shards == (0,)


def test_a_restored_dump_of_the_coordinator_verifies_once_distributed(
    citus: CitusCluster, citus_url: str, tmp_path: Path
) -> None:
    """runbooks/backup.md on Citus: the coordinator's dump holds every row (Citus's COPY reads
    the shards) as plain tables; restored into a new database of the cluster and distributed
    again, its log verifies under the checkpoint saved before the dump, and its grants,
    policies and triggers are the original's."""
    runner = CliRunner()
    checkpoint, dump = tmp_path / "checkpoint-kept.txt", tmp_path / "lineage.dump"
    env = {"LINEAGE_DATABASE_URL": citus_url}
    saved = runner.invoke(
        cli.app, ["log", "checkpoint", "--tenant", "kept", "--out", str(checkpoint)], env=env
    )
    assert saved.exit_code == 0, saved.output
    subprocess.run(
        [str(PG15_BIN / "pg_dump"), "--format=custom", f"--file={dump}", citus_url], check=True
    )
    restored = citus.create_database("lineage_citus_restored")
    subprocess.run(
        [str(PG15_BIN / "pg_restore"), "--exit-on-error", f"--dbname={restored}", str(dump)],
        check=True,
    )
    env = {"LINEAGE_DATABASE_URL": restored}
    for argv in (
        ["distribute"],
        ["log", "verify", ANSWER_ID, "--checkpoint", str(checkpoint)],
        ["log", "monitor", "--old", str(checkpoint)],
    ):
        done = runner.invoke(cli.app, argv, env=env)
        assert done.exit_code == 0, f"{argv}: {done.output}"
    assert distributed(restored) == distributed(citus_url)
    assert posture(restored) == posture(citus_url)
    assert asyncio.run(_rows(restored, "kept")) == asyncio.run(_rows(citus_url, "kept"))
    asyncio.run(_check_confined(restored))


def distributed(url: str) -> list[tuple[str, str]]:
    """Each Citus table and how it is placed: by tenant_id ('h') or on every node ('n')."""
    with psycopg.connect(url) as coordinator:
        return coordinator.execute(
            "SELECT logicalrelid::regclass::text, partmethod FROM pg_dist_partition ORDER BY 1"
        ).fetchall()


async def _check_confined(url: str) -> None:
    """The application role sees its tenant's records only, and cannot change one."""
    async with database_at(url, max_size=1) as database:
        async with database.tenant("someone_else") as tx:
            assert await tx.connection.fetchval("SELECT count(*) FROM provenance") == 0
        async with database.tenant("kept") as tx:
            assert await tx.connection.fetchval("SELECT count(*) FROM provenance") > 10
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await tx.connection.execute("UPDATE provenance SET kind = 'answer'")


def test_migrating_a_distributed_schema_places_the_postings_table_beside_the_records(
    citus: CitusCluster,
) -> None:
    """Migration 0034 on a schema `lineage distribute` placed: invalidation_postings is
    distributed with the tenants, filled from the records' postings on their shards, and an
    invalidation as the application role answers from it what the records' postings say. The
    records are appended at the newest revision, then the schema goes down to 0033 (through
    0036's downgrade, which puts root_sources back on the shards) and up again."""
    url = citus.create_database("lineage_citus_postings")
    migrate(url)
    distribute(url)
    snapshot = "index_snapshot:idx_2026_08_01"

    async def load() -> None:
        owner, database = await _pools(url)
        try:
            await auth.create_tenant(owner, "posted")
            await load_incident(PostgresStore(database, "posted"))
        finally:
            await database.close()
            await owner.close()

    async def invalidated() -> list[tuple[str, int]]:
        owner, database = await _pools(url)
        try:
            rows = await reads.run(
                database, Settings(), "invalidate_ids_by_index_snapshot", tenant_id="posted",
                index_snapshot=snapshot.split(":", 1)[1], kind="all", max_depth=20,
            )  # fmt: skip
        finally:
            await database.close()
            await owner.close()
        return [(row["context_id"], row["depth"]) for row in rows]

    asyncio.run(load())
    radius = "SELECT count(*) FROM root_sources WHERE tenant_id = 'posted'"
    downgrade(url, "0035")
    with psycopg.connect(url) as coordinator:
        assert (coordinator.execute(radius).fetchone() or (0,))[0] > 0
    downgrade(url, "0033")
    migrate(url)
    with psycopg.connect(url) as coordinator:
        placed = coordinator.execute(
            "SELECT p.colocationid = t.colocationid FROM pg_dist_partition AS p, "
            "pg_dist_partition AS t WHERE p.logicalrelid = 'invalidation_postings'::regclass "
            "AND t.logicalrelid = 'tenants'::regclass"
        ).fetchone()
        expected = coordinator.execute(
            "SELECT p.context_id, p.upstream_depths[array_position(p.upstream_keys, k.key_no)] "
            "AS depth FROM provenance AS p JOIN invalidation_keys AS k "
            "ON k.tenant_id = p.tenant_id AND k.key = %s "
            "WHERE p.tenant_id = 'posted' AND k.key_no = ANY (p.upstream_keys) "
            "ORDER BY depth, context_id",
            (snapshot,),
        ).fetchall()
    assert placed == (True,)
    assert expected and asyncio.run(invalidated()) == [tuple(row) for row in expected]
