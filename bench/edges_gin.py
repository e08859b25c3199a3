"""The edge table against a GIN index on the records' own parent_ids, on a database `python -m
bench` loaded: what each stores, a walk down (sql/blast_radius.sql) through each, interleaved
start by start, and the plan each probe gets once the statistics say the tenants are many.

    python -m bench.edges_gin --url postgresql://postgres@127.0.0.1:5432/lineage_bench_classic_public_classic_provenance

The GIN index is built for the run and dropped after it, with the statistics put back; the
walks run as the superuser (no row security) with JIT off, the second of two passes timed.
"""

import argparse
import asyncio
import re
import statistics
import time

import asyncpg

from bench.run import TENANT
from lineage.db.named_sql import QUERIES

PROBE = re.compile(
    r"coalesce\(x\.context_uuid::text, x\.context_id\)(.*?)FROM provenance_children AS x\s+"
    r"WHERE x\.tenant_id = (\$\d+) AND x\.parent_key = md5\(parent\.id\)::uuid",
    re.DOTALL,
)
# The same probe through the records' parent_ids, by the GIN index when the planner takes it.
GIN_PROBE = (
    r"x.context_id\1FROM provenance AS x "
    r"WHERE x.tenant_id = \2 AND x.parent_ids @> ARRAY[parent.id]"
)
INDEXES = {
    "GIN (parent_ids)": "CREATE INDEX bench_parents ON provenance USING gin (parent_ids)",
    "GIN (tenant_id, parent_ids), btree_gin": (
        "CREATE INDEX bench_parents ON provenance USING gin (tenant_id, parent_ids)"
    ),
}


async def relation_bytes(connection: asyncpg.Connection, parent: str) -> int:
    """A partitioned table's or index's bytes over its partitions."""
    return int(
        await connection.fetchval(
            "SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree($1::regclass)",
            parent,
        )
    )


def walk_values(start: str) -> dict[str, object]:
    return {"tenant_id": TENANT, "context_ids": [start], "kind": "answer", "max_depth": 20}


async def partitions(connection: asyncpg.Connection) -> list[str]:
    """The records' and edges' tables that hold rows: statistics are each partition's own."""
    return [
        row[0]
        for row in await connection.fetch(
            "SELECT t.relid::regclass::text FROM unnest(ARRAY['provenance', 'provenance_children'])"
            " AS p (name), pg_partition_tree(p.name::regclass) AS t WHERE t.isleaf"
        )
    ]


async def walk_down(connection: asyncpg.Connection, starts: list[str]) -> dict[str, list[float]]:
    query = QUERIES["blast_radius"]
    sides = {"edge table": query.sql, "GIN probe": PROBE.sub(GIN_PROBE, query.sql)}
    assert sides["GIN probe"] != query.sql, "sql/blast_radius.sql no longer probes the edges"
    timings: dict[str, list[float]] = {name: [] for name in sides}
    differ = more = 0
    for timed in (False, True):
        for start in starts:
            values = walk_values(start)
            answers = []
            for name, sql in sides.items():
                began = time.perf_counter()
                rows = await connection.fetch(sql, *(values[p] for p in query.parameters))
                if timed:
                    timings[name].append((time.perf_counter() - began) * 1000)
                answers.append([row["context_id"] for row in rows])
            # Records written around lineage_append have no edge rows; the GIN sees their parents.
            differ += answers[0] != answers[1]
            more += set(answers[0]) < set(answers[1])
    timings["starts whose answers differ"] = [float(differ)]
    timings["of which the GIN probe finds more"] = [float(more)]
    return timings


def literal(value: object) -> str:
    text = "{" + ",".join(value) + "}" if isinstance(value, list) else str(value)
    return "'" + text.replace("'", "''") + "'"


async def generic_plan(connection: asyncpg.Connection, start: str) -> str:
    """The probe's generic plan with statistics of 1,000 tenants: the walk's time on it and
    the indexes it reads."""
    query = QUERIES["blast_radius"]
    await connection.execute("SET plan_cache_mode = force_generic_plan")
    sql = PROBE.sub(GIN_PROBE, query.sql)
    values = walk_values(start)
    await connection.execute("PREPARE bench_probe AS " + sql)
    literals = ", ".join(literal(values[p]) for p in query.parameters)
    plan = [row[0] for row in await connection.fetch(f"EXPLAIN EXECUTE bench_probe({literals})")]
    # The same walk run on that plan, given ten seconds.
    await connection.execute("SET statement_timeout = '10s'")
    began = time.perf_counter()
    try:
        await connection.execute(f"EXECUTE bench_probe({literals})")
        took = f"the walk took {(time.perf_counter() - began) * 1000:.1f} ms"
    except asyncpg.QueryCanceledError:
        took = "the walk did not finish in 10 s"
    await connection.execute("RESET statement_timeout")
    await connection.execute("DEALLOCATE bench_probe")
    await connection.execute("RESET plan_cache_mode")
    scan = next(n for n, line in enumerate(plan) if re.search(r"on provenance\w* x\b", line))
    depth = len(plan[scan]) - len(plan[scan].lstrip())
    below = [plan[scan]]
    for line in plan[scan + 1 :]:
        if len(line) - len(line.lstrip()) <= depth:
            break
        below.append(line)
    read = "; ".join(re.sub(r"\s+\(cost=[^)]*\)", "", line).strip(" ->") for line in below)
    return f"{took}; {read}"


async def main(url: str, starts: int) -> None:
    connection = await asyncpg.connect(url)
    await connection.execute("SET jit = off")
    edges = await relation_bytes(connection, "provenance_children")
    records = await connection.fetchval("SELECT count(*) FROM provenance")
    picked = {
        kind: [
            row[0]
            for row in await connection.fetch(
                "SELECT context_id FROM provenance WHERE tenant_id = $1 AND kind = $2"
                " ORDER BY md5(context_id) LIMIT $3",
                TENANT, kind, starts,
            )
        ]
        for kind in ("document", "chunk")
    }  # fmt: skip
    print(f"{records:,} records; provenance_children {edges / records:.0f} bytes a record")
    for label, create in INDEXES.items():
        if "btree_gin" in label:
            await connection.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
        await connection.execute(create)
        try:
            size = await relation_bytes(connection, "bench_parents")
            share = f"{size / edges:.1%} of the edges"
            print(f"\n{label}: {size / records:.0f} bytes a record ({share})")
            for kind, ids in picked.items():
                timings = await walk_down(connection, ids)
                differ = int(timings.pop("starts whose answers differ")[0])
                more = int(timings.pop("of which the GIN probe finds more")[0])
                p50 = {name: statistics.median(runs) for name, runs in timings.items()}
                p90 = {name: sorted(runs)[int(len(runs) * 0.9)] for name, runs in timings.items()}
                print(
                    f"  walk down from a {kind} ({len(ids)} starts; answers differ for {differ}, "
                    f"the GIN probe's a superset for {more}): "
                    + ", ".join(f"{n} p50 {p50[n]:.2f} / p90 {p90[n]:.2f} ms" for n in p50)
                )
            for table in await partitions(connection):
                await connection.execute(
                    f"ALTER TABLE {table} ALTER COLUMN tenant_id SET (n_distinct = 1000)"
                )
            await connection.execute("ANALYZE provenance, provenance_children")
            print("  generic plan, statistics of 1,000 tenants:", await generic_plan(
                connection, picked["document"][0]))  # fmt: skip
        finally:
            for table in await partitions(connection):
                await connection.execute(
                    f"ALTER TABLE {table} ALTER COLUMN tenant_id RESET (n_distinct)"
                )
            await connection.execute("DROP INDEX IF EXISTS bench_parents")
            await connection.execute("ANALYZE provenance, provenance_children")
    await connection.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--starts", type=int, default=100)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.url, arguments.starts))
