"""Postings that list records by number instead of by id: what they would store, and what
mapping the numbers back to ids costs a read, on a database `python -m bench` loaded.

    python -m bench.postings_numbers --url postgresql://postgres@127.0.0.1:5432/lineage_bench_10000000

The number is the record's place in the tenant's stream (created_at, then id), numbered in a
scratch table keyed by it, as `events` keys each appended record's stream position: a read maps
the numbers back to ids by a probe of that key. (A loaded database has no events for the records
the load wrote, so the bench numbers them itself.) For the keys timed (the source with the most
answers, the transform version and the index snapshot with the most answers) the candidate's
rows are built beside the postings, each row's ids replaced by their positions, with the
postings' b-tree; the bytes are reckoned over every postings row. Each read runs as the
superuser with JIT off, the sides in turn, a warm-up pass and then the median of `--passes`,
and both sides must list the same rows.
"""

import argparse
import asyncio
import statistics
import time

import asyncpg

from bench.run import TENANT

# A postings row's ids (migration 0048: UUIDs as uuid, the others as text).
IDS_OF = "ip.context_uuids::text[] || ip.context_ids"
# Every postings row's id arrays as stored, and as one array of 8- or 4-byte numbers would be
# (an array's header is 24 bytes: one dimension, no nulls).
BYTES = f"""
SELECT count(*) AS rows, sum(cardinality({IDS_OF})) AS ids,
       sum(coalesce(pg_column_size(context_uuids), 0) + coalesce(pg_column_size(context_ids), 0))
           AS id_bytes,
       sum(24 + 8 * cardinality({IDS_OF})) AS bigint_bytes,
       sum(24 + 4 * cardinality({IDS_OF})) AS integer_bytes
FROM invalidation_postings AS ip
"""
TABLE_BYTES = "SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree($1::regclass)"
# The key of each kind with the most answers.
KEYS = f"""
SELECT DISTINCT ON (split_part(k.key, ':', 1)) split_part(k.key, ':', 1), k.key, k.key_no,
       sum(cardinality({IDS_OF})) AS answers
FROM invalidation_postings AS ip
JOIN invalidation_keys AS k ON k.tenant_id = ip.tenant_id AND k.key_no = ip.key_no
WHERE ip.tenant_id = $1 AND ip.kind = 'answer'
GROUP BY 1, 2, 3
ORDER BY 1, 4 DESC
"""
NUMBERS = """
CREATE TEMP TABLE bench_positions AS
SELECT p.context_id, row_number() OVER (ORDER BY p.created_at, p.context_id) AS position
FROM provenance AS p WHERE p.tenant_id = $1
"""
BUILD = f"""
CREATE TABLE bench_postings_numbers AS
SELECT ip.tenant_id, ip.key_no, ip.kind, ip.depth, ip.created_at,
       ARRAY(SELECT p.position FROM unnest({IDS_OF}) AS id (context_id)
             JOIN bench_positions AS p ON p.context_id = id.context_id
             ORDER BY p.position) AS positions
FROM invalidation_postings AS ip WHERE ip.tenant_id = $1 AND ip.key_no = ANY ($2::int[])
"""
INDEX = "CREATE INDEX ON bench_postings_numbers (tenant_id, key_no, kind, depth)"
# The answers under a key: the ids as stored, or the numbers mapped back to ids ({mapped}).
ANSWERS = """
        SELECT {id}, ip.kind, ip.depth
        FROM {table} AS ip
        CROSS JOIN LATERAL unnest({ids}) AS n (value)
        {mapped}
        WHERE ip.tenant_id = $1 AND ip.key_no = $2 AND ip.kind = 'answer' AND ip.depth <= 20
        ORDER BY ip.depth, {order}"""
PROBED = """CROSS JOIN LATERAL (SELECT e.context_id FROM bench_positions AS e
                            WHERE e.position = n.value OFFSET 0) AS e"""
JOINED = "JOIN bench_positions AS e ON e.position = n.value"
NUMBERS_READ = {"id": "e.context_id", "table": "bench_postings_numbers", "ids": "ip.positions"}
IDS = {
    "ids (as stored)": ANSWERS.format(
        id="n.value", table="invalidation_postings", ids=IDS_OF, mapped="", order="n.value"
    ),
    "numbers, mapped, in id order": ANSWERS.format(
        **NUMBERS_READ, mapped=PROBED, order="e.context_id"
    ),
    "numbers, mapped, in stream order": ANSWERS.format(
        **NUMBERS_READ, mapped=PROBED, order="n.value"
    ),
    "numbers, joined as the planner likes, in id order": ANSWERS.format(
        **NUMBERS_READ, mapped=JOINED, order="e.context_id"
    ),
}


async def timed_reads(
    connection: asyncpg.Connection, key_no: int, passes: int
) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {name: [] for name in IDS}
    for timed in [False] + [True] * passes:
        answers = []
        for name, sql in IDS.items():
            began = time.perf_counter()
            rows = await connection.fetch(sql, TENANT, key_no)
            if timed:
                timings[name].append((time.perf_counter() - began) * 1000)
            answers.append(rows)
        by_id = [sorted(tuple(row) for row in rows) for rows in answers]
        assert all(each == by_id[0] for each in by_id), "the sides list other rows"
        assert [tuple(r) for r in answers[0]] == [tuple(r) for r in answers[1]], "id order"
    return timings


async def main(url: str, passes: int) -> None:
    connection = await asyncpg.connect(url)
    await connection.execute("SET jit = off")
    records = await connection.fetchval("SELECT count(*) FROM provenance")
    stored = await connection.fetchrow(BYTES)
    table = await connection.fetchval(TABLE_BYTES, "invalidation_postings")
    print(f"{records:,} records; invalidation_postings {table / records:.0f} bytes a record "
          f"with its index: {stored['rows']:,} rows listing {stored['ids']:,} ids")  # fmt: skip
    for name, column in (("as stored", "id_bytes"), ("as bigint", "bigint_bytes"),
                         ("as integer", "integer_bytes")):  # fmt: skip
        saved = stored["id_bytes"] - stored[column]
        print(f"  the id arrays {name}: {stored[column] / records:.0f} bytes a record "
              f"(the table {(table - saved) / records:.0f})")  # fmt: skip
    keys = await connection.fetch(KEYS, TENANT)
    await connection.execute("DROP TABLE IF EXISTS bench_postings_numbers")
    began = time.perf_counter()
    await connection.execute(NUMBERS, TENANT)
    await connection.execute("ALTER TABLE bench_positions ADD PRIMARY KEY (position)")
    await connection.execute("CREATE INDEX ON bench_positions (context_id)")
    await connection.execute("ANALYZE bench_positions")
    await connection.execute(BUILD, TENANT, [row["key_no"] for row in keys])
    await connection.execute(INDEX)
    await connection.execute("VACUUM ANALYZE bench_postings_numbers")
    print(f"candidate rows for {len(keys)} keys built in {time.perf_counter() - began:.1f} s")
    try:
        for row in keys:
            timings = await timed_reads(connection, row["key_no"], passes)
            p50 = {name: statistics.median(runs) for name, runs in timings.items()}
            base = p50["ids (as stored)"]
            print(f"  {row['key']} ({row['answers']:,} answers): " + ", ".join(
                f"{name} {ms:.0f} ms ({ms / base:.2f}x)" for name, ms in p50.items()))  # fmt: skip
    finally:
        await connection.execute("DROP TABLE IF EXISTS bench_postings_numbers")
        await connection.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--passes", type=int, default=3)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.url, arguments.passes))
