"""A throwaway Citus cluster: a coordinator and two workers, each a private PostgreSQL 15
(tests/private_postgres.py) on its own free port with `shared_preload_libraries = citus`,
stopped and deleted afterwards.

Citus is built against the system's PostgreSQL 15 (.ci/run builds it when citus.so is missing),
so these servers run /usr/lib/postgresql/15/bin, not the embedded wheel's binaries.
"""

import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import psycopg
from psycopg import sql

from tests.private_postgres import PrivatePostgres

PG15_BIN = Path("/usr/lib/postgresql/15/bin")
CITUS_SO = Path("/usr/lib/postgresql/15/lib/citus.so")

CITUS_SETTINGS = {
    "shared_preload_libraries": "'citus'",
    # A walk, an append and the shard moves of one test each open a connection per worker, and
    # each test database's maintenance daemon holds its own.
    "max_connections": "200",
    # Shard moves copy by logical replication.
    "wal_level": "logical",
    # Citus runs a maintenance daemon per database, and a shard move's apply worker needs one
    # more: at the default 8, a session's eighth test database left none and the move waited.
    "max_worker_processes": "32",
}


@cache
def citus_settings() -> dict[str, str]:
    """CITUS_SETTINGS, plus the citus output plugin allowed where the server restricts them
    (PostgreSQL 15.19 and later): a tenant's isolation splits shards through it."""
    described = subprocess.run(
        [str(PG15_BIN / "postgres"), "--describe-config"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    if not any(line.startswith("output_plugin_libraries\t") for line in described.splitlines()):
        return CITUS_SETTINGS
    return {**CITUS_SETTINGS, "output_plugin_libraries": "'pgoutput, test_decoding, citus'"}


def citus_installed() -> bool:
    return CITUS_SO.exists() and (PG15_BIN / "postgres").exists()


@dataclass(frozen=True)
class CitusCluster:
    coordinator: PrivatePostgres
    workers: tuple[PrivatePostgres, ...]

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.coordinator.port}/{dbname}"

    def worker_url(self, index: int, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.workers[index].port}/{dbname}"

    def create_database(self, dbname: str) -> str:
        """A database of that name on every node, with the citus extension, the workers added
        to its coordinator; returns the coordinator's URL for it. (Citus 12 does not propagate
        CREATE DATABASE, and each database is its own cluster.)"""
        for server in (self.coordinator, *self.workers):
            with psycopg.connect(server.url, autocommit=True) as admin:
                admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
            with psycopg.connect(_with_db(server.url, dbname), autocommit=True) as node:
                node.execute("CREATE EXTENSION citus")
        with psycopg.connect(self.url(dbname), autocommit=True) as coordinator:
            coordinator.execute(
                "SELECT citus_set_coordinator_host('127.0.0.1', %s)", (self.coordinator.port,)
            )
            for worker in self.workers:
                coordinator.execute("SELECT citus_add_node('127.0.0.1', %s)", (worker.port,))
        return self.url(dbname)

    def drop_database(self, dbname: str) -> None:
        """Drop a database create_database made, from every node."""
        for server in (self.coordinator, *self.workers):
            with psycopg.connect(server.url, autocommit=True) as admin:
                admin.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(dbname)
                    )
                )


def _with_db(url: str, dbname: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + dbname


@contextmanager
def citus_cluster(workers: int = 2) -> Iterator[CitusCluster]:
    """A started coordinator and `workers` workers; stopped and deleted afterwards."""
    with ExitStack() as stack:
        servers: list[PrivatePostgres] = []
        for _ in range(1 + workers):
            server = PrivatePostgres(bin_dir=PG15_BIN, settings=citus_settings())
            stack.callback(server.destroy)
            server.start()
            servers.append(server)
        yield CitusCluster(coordinator=servers[0], workers=tuple(servers[1:]))


def tenant_port(coordinator: psycopg.Connection, tenant: str) -> int:
    """The port of the worker holding the tenant's shard group."""
    row = coordinator.execute(
        "SELECT nodeport FROM pg_dist_shard_placement "
        "WHERE shardid = get_shard_id_for_distribution_column('provenance', %s::text)",
        (tenant,),
    ).fetchone()
    assert row is not None
    port: int = row[0]
    return port


def move_tenant_shards(url: str, tenant: str) -> tuple[int, int]:
    """Move the tenant's shard (and every shard colocated with it) to the other worker, as a
    rebalance or an operator moving a hot tenant would; returns (from port, to port)."""
    with psycopg.connect(url, autocommit=True) as coordinator:
        row = coordinator.execute(
            "SELECT shardid, nodename, nodeport FROM citus_shards "
            "WHERE table_name = 'provenance'::regclass "
            "AND shardid = get_shard_id_for_distribution_column('provenance', %s::text)",
            (tenant,),
        ).fetchone()
        assert row is not None
        shard, host, port = row
        target = coordinator.execute(
            "SELECT node_name, node_port FROM citus_get_active_worker_nodes() "
            "WHERE node_port <> %s",
            (port,),
        ).fetchone()
        assert target is not None
        coordinator.execute(
            "SELECT citus_move_shard_placement(%s, %s, %s, %s, %s)",
            (shard, host, port, target[0], target[1]),
        )
        return port, target[1]
