"""Can an append be one router call on Citus, and keep working with another worker down?

    python -m bench.citus_append

On a private Citus 12 cluster (a coordinator and two workers, tests/citus_cluster.py) with the
schema migrated and placed by `lineage distribute`, each shape of an append's writes is a
PL/pgSQL function distributed by its tenant argument and colocated with provenance, so Citus
delegates the call to the worker that holds the tenant's shards. Each is called for one tenant
with both workers up, then with the other worker (holding none of the tenant's shards) stopped:

- `cte_chain`: the records inserted and their stream events in one statement, the second
  insert reading the first's RETURNING (the shape of sql/append_contexts.sql);
- `two_statements`: the same writes as two statements, the inserted ids carried between them
  in a variable;
- `one_insert`: the provenance insert alone.

Prints, for each shape, whether it was answered (and in how long) in each state, and the
remote commands the coordinator sent for one call. Needs Citus built into
/usr/lib/postgresql/15 (.ci/run builds it).
"""

import json
import time
from typing import Any

import psycopg

from lineage.db.distribute import distribute
from lineage.db.migrate import migrate
from tests.citus_cluster import CitusCluster, citus_cluster

TENANT = "acme"
INSERT_RECORDS = """INSERT INTO provenance (tenant_id, context_id, parent_ids, kind, source_uri,
        content_hash, created_at, attributes)
    SELECT p_tenant, r.id || p_tag, '{}', 'document', 's3://bench/' || r.id,
           'sha256:' || repeat('a', 64), now(), '{}'
    FROM unnest(p_ids) AS r (id)
    ON CONFLICT DO NOTHING
    RETURNING context_id"""
# The tenant's next stream positions, one a row (a bench's: the append takes a counter).
NEXT_POSITION = """(SELECT coalesce(max(e.position), 0) FROM events AS e
                          WHERE e.tenant_id = p_tenant) + row_number() OVER ()"""
SHAPES = {
    "cte_chain": f"""WITH inserted AS ({INSERT_RECORDS}),
    queued AS (INSERT INTO events (tenant_id, position, context_id)
               SELECT p_tenant, {NEXT_POSITION}, context_id FROM inserted RETURNING 1)
    SELECT count(*) INTO written FROM inserted;""",
    "two_statements": f"""WITH inserted AS ({INSERT_RECORDS})
    SELECT array_agg(context_id) INTO new_ids FROM inserted;
    INSERT INTO events (tenant_id, position, context_id)
    SELECT p_tenant, {NEXT_POSITION}, id FROM unnest(new_ids) AS id;""",
    "one_insert": f"""WITH inserted AS ({INSERT_RECORDS})
    SELECT count(*) INTO written FROM inserted;""",
}


def create_shapes(connection: psycopg.Connection[Any]) -> None:
    for name, body in SHAPES.items():
        connection.execute(
            f"""CREATE FUNCTION bench_append_{name}(p_tenant text, p_ids text[], p_tag text)
            RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
            DECLARE written bigint; new_ids text[];
            BEGIN {body} END $$"""
        )
        connection.execute(
            "SELECT create_distributed_function(%s, 'p_tenant', colocate_with := 'provenance',"
            " force_delegation := true)",
            (f"bench_append_{name}(text,text[],text)",),
        )


def call(connection: psycopg.Connection[Any], name: str, tag: str) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        with connection.transaction():
            connection.execute(
                f"SELECT bench_append_{name}(%s, ARRAY['d1', 'd2', 'd3'], %s)", (TENANT, tag)
            )
    except psycopg.Error as exc:
        return {"answered": False, "error": str(exc).splitlines()[0][:120]}
    return {"answered": True, "ms": round((time.perf_counter() - started) * 1000, 1)}


def remote_commands(connection: psycopg.Connection[Any], name: str) -> list[str]:
    """What the coordinator sends the workers for one call."""
    sent: list[str] = []
    connection.add_notice_handler(lambda notice: sent.append(str(notice.message_primary)))
    connection.execute("SET citus.log_remote_commands = on")
    connection.execute("SET client_min_messages = log")
    call(connection, name, "logged")
    connection.execute("RESET citus.log_remote_commands")
    connection.execute("RESET client_min_messages")
    return [line for line in sent if line.startswith("issuing")]


def run(cluster: CitusCluster) -> dict[str, Any]:
    url = cluster.create_database("bench_append")
    migrate(url)
    distribute(url)
    report: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("INSERT INTO tenants (tenant_id) VALUES (%s)", (TENANT,))
        create_shapes(connection)
        [(port,)] = connection.execute(
            "SELECT nodeport FROM pg_dist_shard_placement "
            "WHERE shardid = get_shard_id_for_distribution_column('provenance', %s::text)",
            (TENANT,),
        ).fetchall()
        for name in SHAPES:
            report[name] = {"workers up": call(connection, name, "up")}
            report[name]["remote commands"] = remote_commands(connection, name)
        other = next(worker for worker in cluster.workers if worker.port != port)
        other.stop("immediate")
        for name in SHAPES:
            report[name]["other worker down"] = call(connection, name, "down")
    return report


def main() -> None:
    with citus_cluster() as cluster:
        print(json.dumps(run(cluster), indent=2))


if __name__ == "__main__":
    main()
