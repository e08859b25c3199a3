"""Lineage on Citus: a private coordinator and two workers (tests/citus_cluster.py)."""

import psycopg
import pytest

from tests.citus_cluster import CitusCluster

pytestmark = [pytest.mark.citus, pytest.mark.slow]


def test_the_cluster_has_a_coordinator_and_two_workers(citus: CitusCluster) -> None:
    url = citus.create_database("lineage_citus_smoke")
    with psycopg.connect(url) as coordinator:
        workers = coordinator.execute(
            "SELECT node_name, node_port FROM citus_get_active_worker_nodes() ORDER BY node_port"
        ).fetchall()
    assert workers == sorted(("127.0.0.1", worker.port) for worker in citus.workers)
