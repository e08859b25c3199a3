"""How long migration 0032 takes to give records stored before postings (0028) their
invalidation postings, per record, on the generated DAG.

    python -m bench.backfill --records 200000 --url postgresql://postgres@127.0.0.1:5432/postgres

Loads the synthetic DAG (bench/dag.py) into a database at revision 0031 (the loader writes each
record's postings, as the append computes them), keeps a copy and a checksum of those postings,
then as the superuser sets every record's to NULL as tests/test_postings_backfill.py does (a
release before 0028 stored none), VACUUM ANALYZE (--compact: VACUUM FULL, so that no space the
dropped postings freed takes the migration's new row versions), and times
`lineage.db.migrate.migrate` to the head (0032 fills them level by level). Afterwards no record
may be without postings and every record's must equal the loader's. The rewrite leaves a dead
version of every row: provenance's size (all partitions, indexes and TOAST) is given before,
after, and after VACUUM.
"""

import argparse
import asyncio
import hashlib
import time
from dataclasses import dataclass

import asyncpg

from bench.database import drop, load, recreate
from lineage.db.migrate import MIGRATIONS_DIR, migrate

DBNAME = "lineage_bench_backfill"
BEFORE_BACKFILL = "0031"
TIMED = MIGRATIONS_DIR / "versions" / "0032_postings_for_older_records.py"
PER_PROJECTION = 10_000_000
# Every record's postings in one md5: one md5 a row, in context_id order (32 bytes a record in
# the aggregate, so 10M records stay well under a text value's 1 GB); the keys as text.
CHECKSUM = """
    SELECT md5(string_agg(md5(p.context_id || '|' || coalesce(({keys})::text, 'NULL') || '|'
                              || coalesce(p.upstream_depths::text, 'NULL')),
                          '' ORDER BY p.context_id COLLATE "C"))
    FROM provenance AS p
"""
# Since migration 0038 a record keeps its keys by number, named in invalidation_keys.
NAMED_KEYS = """
    CASE WHEN p.upstream_keys IS NOT NULL THEN
        ARRAY(SELECT k.key FROM unnest(p.upstream_keys) WITH ORDINALITY AS u (key_no, o)
              JOIN invalidation_keys AS k ON k.tenant_id = p.tenant_id AND k.key_no = u.key_no
              ORDER BY u.o) END
"""
# provenance is partitioned (0016): its own relation is empty, its partitions hold the rows.
SIZE = """
    SELECT coalesce(sum(pg_total_relation_size(relid)), 0)::bigint
    FROM pg_partition_tree('provenance'::regclass)
"""
KEPT = "bench_postings_loaded"  # the loader's postings, to compare row by row
DIFFERING = f"""
    SELECT count(*) FROM provenance AS p FULL JOIN {KEPT} AS k USING (context_id)
    WHERE ({{keys}}, p.upstream_depths) IS DISTINCT FROM (k.upstream_keys, k.upstream_depths)
"""


async def checksum_and_differing(connection: asyncpg.Connection) -> tuple[str, str]:
    """CHECKSUM and DIFFERING with the records' keys as text, as the schema keeps them."""
    numbered = await connection.fetchval("SELECT to_regclass('invalidation_keys') IS NOT NULL")
    keys = NAMED_KEYS if numbered else "p.upstream_keys"
    return CHECKSUM.format(keys=keys), DIFFERING.format(keys=keys)


@dataclass
class Figures:
    records: int = 0
    seconds: float = 0.0
    loaded_bytes: int = 0
    before_bytes: int = 0  # postings NULL, vacuumed: what the migration starts from
    after_bytes: int = 0
    vacuumed_bytes: int = 0
    vacuum_s: float = 0.0
    checksum: str = ""
    vacuum: str = ""  # how the table was vacuumed after the postings were dropped
    revision_md5: str = ""  # of 0032's file when the migration read it: which version was timed

    def lines(self) -> list[str]:
        per_s = self.records / self.seconds
        return [
            f"records: {self.records:,}",
            f"migrate 0031 -> head (0032): {self.seconds:,.1f} s",
            f"records/s: {per_s:,.0f}",
            f"minutes per {PER_PROJECTION:,} records (linear): {PER_PROJECTION / per_s / 60:,.1f}",
            f"provenance as loaded: {mb(self.loaded_bytes)}",
            f"provenance before the migration (postings NULL, {self.vacuum}): "
            f"{mb(self.before_bytes)}",
            f"provenance after the migration: {mb(self.after_bytes)}",
            f"provenance after VACUUM provenance ({self.vacuum_s:,.1f} s): "
            f"{mb(self.vacuumed_bytes)}",
            f"postings checksum, loaded = backfilled: {self.checksum}",
            f"md5 of {TIMED.name}: {self.revision_md5}",
        ]


def mb(size: int) -> str:
    return f"{size / 2**20:,.0f} MB"


class BackfillWrong(Exception):
    """The migration left a record without postings, or with others than the loader's."""


async def kept(url: str, figures: Figures) -> None:
    """The loaded records' count, size and postings (a copy and their checksum)."""
    connection = await asyncpg.connect(url)
    try:
        figures.records = await connection.fetchval("SELECT count(*) FROM provenance")
        figures.loaded_bytes = await connection.fetchval(SIZE)
        unposted = await connection.fetchval(
            "SELECT count(*) FROM provenance WHERE upstream_keys IS NULL"
        )
        if unposted:
            raise BackfillWrong(f"the loader left {unposted:,} records without postings")
        checksum, _ = await checksum_and_differing(connection)
        figures.checksum = await connection.fetchval(checksum)
        await connection.execute(
            f"CREATE UNLOGGED TABLE {KEPT} AS "
            "SELECT context_id, upstream_keys, upstream_depths FROM provenance"
        )
        await connection.execute(f"ALTER TABLE {KEPT} ADD PRIMARY KEY (context_id)")
    finally:
        await connection.close()


async def postings_dropped(url: str) -> None:
    """Every record as a release before 0028 stored it: no postings (the owner's UPDATE and
    the append-only trigger set aside, as only a superuser could), as
    tests/test_postings_backfill.py does."""
    superuser = await asyncpg.connect(url)
    try:
        async with superuser.transaction():
            await superuser.execute("ALTER TABLE provenance DISABLE TRIGGER provenance_append_only")
            await superuser.execute(
                "UPDATE provenance SET upstream_keys = NULL, upstream_depths = NULL"
            )
            await superuser.execute(
                "ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_append_only"
            )
    finally:
        await superuser.close()


async def vacuumed(url: str, figures: Figures, compact: bool) -> None:
    """VACUUM ANALYZE provenance after the postings were dropped. VACUUM leaves the space the
    old versions held free in the table, and the migration's new versions fill it; VACUUM FULL
    packs the rows as a release before 0028 left them, so the new versions extend the table."""
    connection = await asyncpg.connect(url)
    try:
        await connection.execute("VACUUM FULL provenance" if compact else "VACUUM provenance")
        await connection.execute("ANALYZE provenance")
        figures.vacuum = "VACUUM FULL, ANALYZE" if compact else "VACUUM ANALYZE"
        figures.before_bytes = await connection.fetchval(SIZE)
        posted = "SELECT count(*) FROM provenance WHERE upstream_keys IS NOT NULL"
        if await connection.fetchval(posted):
            raise BackfillWrong("postings were not dropped before the migration")
    finally:
        await connection.close()


async def checked(url: str, figures: Figures) -> None:
    """Every record has the loader's postings again; then VACUUM provenance, and the sizes."""
    connection = await asyncpg.connect(url)
    try:
        figures.after_bytes = await connection.fetchval(SIZE)
        unposted = await connection.fetchval(
            "SELECT count(*) FROM provenance WHERE upstream_keys IS NULL OR upstream_depths IS NULL"
        )
        checksum, differing_sql = await checksum_and_differing(connection)
        differing = await connection.fetchval(differing_sql)
        backfilled = await connection.fetchval(checksum)
        if unposted or differing or backfilled != figures.checksum:
            raise BackfillWrong(
                f"after the migration ({figures.seconds:,.1f} s): {unposted:,} records without "
                f"postings, {differing:,} with others than the loader's; checksum loaded "
                f"{figures.checksum}, backfilled {backfilled}"
            )
        started = time.perf_counter()
        await connection.execute("VACUUM provenance")
        figures.vacuum_s = time.perf_counter() - started
        figures.vacuumed_bytes = await connection.fetchval(SIZE)
    finally:
        await connection.close()


async def measure(records: int, server_url: str, keep: bool, compact: bool) -> Figures:
    figures = Figures()
    try:
        url = await recreate(server_url, DBNAME, BEFORE_BACKFILL)
        await load(url, records)
        await kept(url, figures)
        await postings_dropped(url)
        await vacuumed(url, figures, compact)
        figures.revision_md5 = hashlib.md5(TIMED.read_bytes()).hexdigest()
        started = time.perf_counter()
        migrate(url)
        figures.seconds = time.perf_counter() - started
        await checked(url, figures)
        return figures
    finally:
        if not keep:
            await drop(server_url, DBNAME)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records in the DAG")
    parser.add_argument(
        "--url",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="a PostgreSQL superuser URL; the bench makes its own database there",
    )
    parser.add_argument(
        "--compact",
        action="store_true",
        help="VACUUM FULL (not VACUUM) after dropping the postings: no free space in the table",
    )
    parser.add_argument("--keep", action="store_true", help=f"leave {DBNAME} behind")
    arguments = parser.parse_args()
    figures = asyncio.run(
        measure(arguments.records, arguments.url, arguments.keep, arguments.compact)
    )
    print("\n".join(figures.lines()))


if __name__ == "__main__":
    main()
