"""The benchmark's own database: created beside the server's others, migrated like any other,
then filled by COPY as the table owner (secondary indexes dropped for the load, then rebuilt)."""

import itertools
import json
import re
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from bench.dag import (
    COLUMNS,
    PERIOD,
    ROOT_COLUMNS,
    START,
    TRANSFORM_VERSIONS,
    Generator,
    Picks,
    Row,
)
from lineage import db
from lineage.core.progress import Progress, unwatched
from lineage.core.versions import version_key
from lineage.db.migrate import migrate
from lineage.services import postings
from lineage.services.root_sources import SOURCE_KEY, Roots

BATCH = 50_000
# root_sources is the side table of schemas before migration 0036 (bench/retention.py and
# `bench.ingest --before` load those); absent, no index of it is listed.
LOADED_TABLES = ("provenance", "root_sources", "invalidation_postings")
# The invalidation postings (migration 0034), and since migration 0036 those by root source
# under 'source:' and the source_uri, as lineage_append writes them had the records come in
# appends of APPENDED records (in created_at order): a row per append, key, kind, depth and
# month, at most 1,000 ids, in id order.
APPENDED = 100
INVALIDATION_POSTINGS = f"""
INSERT INTO invalidation_postings (tenant_id, {{column}}, kind, depth, created_at, {{ids}})
SELECT $1, g.key, g.kind, g.depth, min(g.created_at), {{aggregates}}
FROM (SELECT {{key}} AS key, r.kind, up.depth, r.created_at, r.context_id, r.append,
             date_trunc('month', r.created_at, 'UTC') AS month
      FROM (SELECT p.*, (row_number() OVER (ORDER BY p.created_at, p.context_id) - 1)
                        / {APPENDED} AS append
            FROM provenance AS p WHERE p.tenant_id = $1) AS r
      CROSS JOIN LATERAL ({{entries}}) AS up (entry, depth){{named}}) AS g
GROUP BY g.key, g.kind, g.depth, g.month, g.append
"""
UPSTREAM_KEYS = "SELECT * FROM unnest(r.upstream_keys, r.upstream_depths)"
SOURCE_KEYS = (
    "SELECT 'source:' || root.uri, root.depth "
    "FROM unnest(r.root_sources, r.root_depths) AS root (uri, depth)"
)
# Since migration 0038 both arrays hold numbers, named in invalidation_keys ('source:' included):
# joined outside the lateral, so that the tenant's keys are read once, not once a record.
NUMBERED_KEYS = (
    "SELECT * FROM unnest(r.upstream_keys, r.upstream_depths) "
    "UNION ALL SELECT * FROM unnest(r.root_sources, r.root_depths)"
)
# The ids as text, or since migration 0048 those that are UUIDs as uuid (lineage_append's test).
TEXT_IDS = {"ids": "context_ids", "aggregates": "array_agg(g.context_id ORDER BY g.context_id)"}
UUID_PATTERN = "'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'"
UUID_IDS = {
    "ids": "context_uuids, context_ids",
    "aggregates": (
        "array_agg(g.context_id::uuid ORDER BY g.context_id) "
        f"FILTER (WHERE g.context_id ~ {UUID_PATTERN}), "
        "array_agg(g.context_id ORDER BY g.context_id) "
        f"FILTER (WHERE g.context_id !~ {UUID_PATTERN})"
    ),
}
UUID_ID = re.compile(UUID_PATTERN.strip("'^$"))
# The parent edges descendant walks probe, as lineage_append writes them.
EDGES = (
    "INSERT INTO provenance_children (tenant_id, parent_id, context_id{columns}) "
    "SELECT p.tenant_id, parent.id, p.context_id{columns} FROM provenance AS p "
    "CROSS JOIN LATERAL unnest(p.parent_ids) AS parent (id) WHERE p.tenant_id = $1"
)
EDGES_KEYED = f"""
INSERT INTO provenance_children (tenant_id, parent_key, context_uuid, context_id, created_at, kind)
SELECT p.tenant_id, md5(parent.id)::uuid,
       CASE WHEN p.context_id ~ {UUID_PATTERN} THEN p.context_id::uuid END,
       CASE WHEN p.context_id !~ {UUID_PATTERN} THEN p.context_id END, p.created_at, p.kind
FROM provenance AS p CROSS JOIN LATERAL unnest(p.parent_ids) AS parent (id)
WHERE p.tenant_id = $1
"""
NAMED = " JOIN invalidation_keys AS named ON named.tenant_id = $1 AND named.key_no = up.entry"
POSTED_AT_MOST = 1000  # ids a postings row holds
MERGED_KEYS = 5_000  # keys a call of lineage_postings_merge_keys merges, one transaction each


def source_postings(tenant_id: str, rows: Iterable[tuple[Row, Roots]]) -> list[Row]:
    """The postings by root source of one append's records, as lineage_append writes them: a
    row per source, kind, depth and month of at most POSTED_AT_MOST ids, in id order."""
    # (key, kind, depth, year, month) -> each record's id and created_at
    grouped: defaultdict[tuple[str, str, int, int, int], list[tuple[str, datetime]]]
    grouped = defaultdict(list)
    at = COLUMNS.index("created_at")
    for row, roots in rows:
        created_at: datetime = row[at]
        utc = created_at.astimezone(UTC)
        for source_uri, depth in roots.items():
            grouped["source:" + source_uri, row[3], depth, utc.year, utc.month].append(
                (row[1], created_at)
            )
    postings = []
    for (key, kind, depth, _, _), ids in grouped.items():
        for start in range(0, len(ids), POSTED_AT_MOST):
            chunk = sorted(ids[start : start + POSTED_AT_MOST])
            created_at = min(moment for _, moment in chunk)
            postings.append((tenant_id, key, kind, depth, created_at, [i for i, _ in chunk]))
    return postings


def split_uuid_ids(ids: list[str]) -> tuple[list[str] | None, list[str] | None]:
    """A postings row's ids as migration 0048 keeps them: those that are UUIDs, the others."""
    uuids: list[str] = []
    others: list[str] = []
    for each in ids:
        (uuids if UUID_ID.fullmatch(each) else others).append(each)
    return uuids or None, others or None


class Postings:
    """Each generated record's invalidation postings, as lineage.services.postings computes
    them for an append, in rows given parents first; equal postings are held once (most
    records of a DAG share them)."""

    CONTEXT_ID = COLUMNS.index("context_id")
    PARENTS = COLUMNS.index("parent_ids")
    TRANSFORM_VERSION = COLUMNS.index("transform_version")
    INDEX_SNAPSHOT = COLUMNS.index("index_snapshot")

    def __init__(self) -> None:
        self.by_id: dict[str, tuple[tuple[str, int], ...]] = {}
        self.shared: dict[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]] = {}

    def of(self, row: Row) -> tuple[list[str], list[int]]:
        parents = [dict(self.by_id.get(parent, ())) for parent in row[self.PARENTS]]
        keys = postings.own_keys(row[self.TRANSFORM_VERSION], row[self.INDEX_SNAPSHOT])
        merged = postings.derived(keys, parents) or {}
        ordered = tuple(sorted(merged.items()))
        self.by_id[row[self.CONTEXT_ID]] = self.shared.setdefault(ordered, ordered)
        return [key for key, _ in ordered], [depth for _, depth in ordered]


class KeyNumbers:
    """A tenant's invalidation keys by number (migration 0038): those stored, and those this
    load numbers as they first come, after the highest stored, until copied."""

    def __init__(self, tenant_id: str, stored: dict[str, int], highest: int) -> None:
        self.tenant_id = tenant_id
        self.numbers = dict(stored)
        self.highest = highest
        self.new: list[tuple[str, int, str]] = []  # invalidation_keys rows not yet copied

    @classmethod
    async def stored(cls, connection: asyncpg.Connection, tenant_id: str) -> "KeyNumbers":
        keys = await connection.fetch(
            "SELECT key, key_no FROM invalidation_keys WHERE tenant_id = $1", tenant_id
        )
        numbers = {k["key"]: k["key_no"] for k in keys}
        return cls(tenant_id, numbers, max(numbers.values(), default=0))

    def of(self, keys: Iterable[str]) -> list[int]:
        numbers = []
        for key in keys:
            if key not in self.numbers:
                self.highest += 1
                self.numbers[key] = self.highest
                self.new.append((self.tenant_id, self.highest, key))
            numbers.append(self.numbers[key])
        return numbers

    async def copy(self, connection: asyncpg.Connection) -> None:
        """COPY the keys numbered since the last copy."""
        await connection.copy_records_to_table(
            "invalidation_keys", records=self.new, columns=("tenant_id", "key_no", "key")
        )
        self.new = []


def url_for(server_url: str, dbname: str) -> str:
    return urlunsplit(urlsplit(server_url)._replace(path=f"/{dbname}"))


async def recreate(server_url: str, dbname: str, revision: str = "head") -> str:
    """A fresh database named dbname on the server, migrated to `revision`; returns its URL."""
    url = await recreate_empty(server_url, dbname)
    migrate(url, revision)
    return url


async def recreate_empty(server_url: str, dbname: str) -> str:
    """A fresh, empty database named dbname on the server; returns its URL."""
    connection = await asyncpg.connect(server_url)
    try:
        await connection.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        await connection.execute(f'CREATE DATABASE "{dbname}"')
    finally:
        await connection.close()
    return url_for(server_url, dbname)


async def load(
    url: str, records: int, tenant_id: str = "default", progress: Progress = unwatched
) -> tuple[Picks, dict[str, float]]:
    """Generate and COPY the DAG; returns the picks and how long each phase took (seconds)."""
    generator = Generator(records, tenant_id)
    timings = await copy_dag(
        url, tenant_id, generator.rows(), records, TRANSFORM_VERSIONS, generator.picks, progress
    )
    return generator.picks, timings


@dataclass(frozen=True)
class Layout:
    """What the database's schema holds (bench/retention.py and `bench.ingest --before` load
    earlier schemas than this checkout's)."""

    partitioned: bool  # month partitions (migration 0016)
    edge_kinds: bool  # the child's kind on its edges (migration 0026)
    posted: bool  # invalidation postings on the records (migration 0028)
    posting_rows: bool  # their table, read by b-tree (migration 0034)
    # Root sources on the records and in the postings (migration 0036); before it, the side
    # table root_sources, a row per record and source.
    rooted: bool
    # Both kept by number, each key named once in invalidation_keys (migration 0038).
    numbered: bool
    # The postings name their key by that number too (migration 0047).
    posting_numbers: bool
    # The postings keep ids that are UUIDs as uuid (migration 0048).
    posting_uuids: bool
    # The service's background round merges a key's small postings rows (migration 0049).
    postings_merged: bool
    # The edges keep the parent as md5 of its id, a child that is a UUID as uuid (0050).
    edge_keys: bool

    @property
    def columns(self) -> list[str]:
        """provenance's columns as the load COPYs them."""
        columns = list(COLUMNS)
        columns += ["upstream_keys", "upstream_depths"] if self.posted else []
        return columns + (["root_sources", "root_depths"] if self.rooted else [])

    @property
    def root_columns(self) -> Sequence[str]:
        """The side table's columns (created_at since migration 0016)."""
        return ROOT_COLUMNS if self.partitioned else ROOT_COLUMNS[:-1]


async def layout_of(connection: asyncpg.Connection) -> Layout:
    return Layout(
        partitioned=await connection.fetchval(
            "SELECT to_regproc('lineage_add_partitions') IS NOT NULL"
        ),
        edge_kinds=await has_column(connection, "provenance_children", "kind"),
        edge_keys=await has_column(connection, "provenance_children", "parent_key"),
        posted=await has_column(connection, "provenance", "upstream_keys"),
        posting_rows=await connection.fetchval(
            "SELECT to_regclass('invalidation_postings') IS NOT NULL"
        ),
        rooted=await has_column(connection, "provenance", "root_sources"),
        numbered=await connection.fetchval("SELECT to_regclass('invalidation_keys') IS NOT NULL"),
        posting_numbers=await has_column(connection, "invalidation_postings", "key_no"),
        posting_uuids=await has_column(connection, "invalidation_postings", "context_uuids"),
        postings_merged=await connection.fetchval(
            "SELECT to_regproc('lineage_postings_merge_keys') IS NOT NULL"
        ),
    )


def postings_sql(layout: Layout) -> str:
    """The postings INSERT: by invalidation key, and by root source where the schema keeps
    the sources on the records (migration 0036), the keys named by number since 0038 and
    listed by number since 0047, UUIDs as uuid since 0048."""
    ids = UUID_IDS if layout.posting_uuids else TEXT_IDS
    if layout.posting_numbers:
        return INVALIDATION_POSTINGS.format(
            column="key_no", key="up.entry", entries=NUMBERED_KEYS, named="", **ids
        )
    if layout.numbered:
        return INVALIDATION_POSTINGS.format(
            column="key", key="named.key", entries=NUMBERED_KEYS, named=NAMED, **ids
        )
    entries = f"{UPSTREAM_KEYS} UNION ALL {SOURCE_KEYS}" if layout.rooted else UPSTREAM_KEYS
    return INVALIDATION_POSTINGS.format(
        column="key", key="up.entry", entries=entries, named="", **ids
    )


async def copy_batch(
    connection: asyncpg.Connection,
    batch: list[tuple[Row, Roots]],
    layout: Layout,
    postings: Postings,
    numbers: KeyNumbers | None,
) -> None:
    """COPY records, each with its postings and root sources as the layout keeps them (by
    `numbers` in the numbered layout, the keys it numbers for them copied after)."""
    if layout.partitioned:  # data not made by the generator may lie outside its period
        moments = [row[COLUMNS.index("created_at")] for row, _ in batch]
        await db.fetch(connection, "partitions_add", from_time=min(moments), through=max(moments))
    await connection.copy_records_to_table(
        "provenance",
        records=[(*row, *kept(row, roots, layout, postings, numbers)) for row, roots in batch],
        columns=layout.columns,
    )
    if numbers is not None:
        await numbers.copy(connection)
    if not layout.rooted:
        root_columns = layout.root_columns
        await connection.copy_records_to_table(
            "root_sources",
            records=[
                root_row(row, s, depth)[: len(root_columns)]
                for row, roots in batch
                for s, depth in roots.items()
            ],
            columns=root_columns,
        )


def kept(
    row: Row, roots: Roots, layout: Layout, postings: Postings, numbers: KeyNumbers | None
) -> tuple[list[str] | list[int], ...]:
    """A record's postings and root sources as its row keeps them in the layout (layout.columns
    after the project's)."""
    upstream_keys, upstream_depths = postings.of(row) if layout.posted else ([], [])
    sources, root_depths = arrays(roots)
    if numbers is not None:
        source_keys = numbers.of(SOURCE_KEY + source for source in sources)
        return numbers.of(upstream_keys), upstream_depths, source_keys, root_depths
    posted = (upstream_keys, upstream_depths) if layout.posted else ()
    return (*posted, *((sources, root_depths) if layout.rooted else ()))


async def copy_dag(
    url: str,
    tenant_id: str,
    rows: Iterator[tuple[Row, Roots]],
    records: int,
    transform_versions: Sequence[str],
    picks: Picks,
    progress: Progress = unwatched,
) -> dict[str, float]:
    """COPY records (parents first, each with its root sources) into a fresh tenant as the table
    owner, secondary indexes dropped for the load and rebuilt after, and their postings written
    as the append writes them; then save the picks, read once `rows` is exhausted. Returns how
    long each phase took (seconds)."""
    connection = await asyncpg.connect(url)
    timings: dict[str, float] = {}
    try:
        await connection.execute("SET maintenance_work_mem = '512MB'")
        await db.fetch(connection, "tenant_create", tenant_id=tenant_id)
        layout = await layout_of(connection)
        if layout.partitioned:
            await db.fetch(connection, "partitions_add", from_time=START, through=START + PERIOD)
        edge_columns = (", kind" if layout.edge_kinds else "") + (
            ", created_at" if layout.partitioned else ""
        )
        indexes = await connection.fetch(
            "SELECT i.indexname, i.indexdef FROM pg_indexes AS i "
            "JOIN pg_index AS x ON x.indexrelid = (quote_ident(i.indexname))::regclass "
            "WHERE i.tablename = ANY ($1::text[]) AND NOT x.indisprimary",
            list(LOADED_TABLES),
        )
        for index in indexes:
            await connection.execute(f'DROP INDEX "{index["indexname"]}"')

        # The bulk DAG stays out of the verifiable log (COPY queues nothing): its sequencer would
        # hash it during the timings. Records appended by the timed ingest paths are queued.
        started = time.perf_counter()
        copied = 0
        postings = Postings()
        numbers = await KeyNumbers.stored(connection, tenant_id) if layout.numbered else None
        while batch := list(itertools.islice(rows, BATCH)):
            progress("generate and copy the DAG", copied, records)
            await copy_batch(connection, batch, layout, postings, numbers)
            copied += len(batch)
        progress("generate and copy the DAG", copied, records)
        await connection.execute(
            (EDGES_KEYED if layout.edge_keys else EDGES.format(columns=edge_columns)), tenant_id
        )
        if layout.posting_rows:
            await connection.execute(postings_sql(layout), tenant_id)
        timings["generate_and_copy_s"] = time.perf_counter() - started

        started = time.perf_counter()
        progress("build indexes, vacuum and analyze")
        for index in indexes:
            # pg_indexes names a partitioned table's index ON ONLY it: built so, no partition
            # would have it (every walk's index missing from the loaded months).
            await connection.execute(index["indexdef"].replace(" ON ONLY ", " ON ", 1))
        timings["index_build_s"] = time.perf_counter() - started
        if layout.postings_merged:
            started = time.perf_counter()
            await merge_postings(connection, tenant_id, progress)
            timings["postings_merge_s"] = time.perf_counter() - started

        await connection.execute(
            "INSERT INTO transform_versions "
            "SELECT $1, split_part(v, '@', 1), v, k, $2 "
            "FROM unnest($3::text[], $4::text[]) AS t (v, k) ON CONFLICT DO NOTHING",
            tenant_id,
            START,
            list(transform_versions),
            [version_key(v) for v in transform_versions],
        )
        started = time.perf_counter()
        await connection.execute("VACUUM (ANALYZE) provenance")
        if not layout.rooted:
            await connection.execute("VACUUM (ANALYZE) root_sources")
        await connection.execute("VACUUM (ANALYZE) provenance_children")
        if layout.posting_rows:
            await connection.execute("VACUUM (ANALYZE) invalidation_postings")
        if layout.numbered:
            await connection.execute("VACUUM (ANALYZE) invalidation_keys")
        timings["vacuum_analyze_s"] = time.perf_counter() - started
        await save_picks(connection, picks)
    finally:
        await connection.close()
    return timings


async def merge_postings(
    connection: asyncpg.Connection, tenant_id: str, progress: Progress = unwatched
) -> None:
    """The postings as the service keeps them once its background round has merged each key's
    small rows (lineage.services.postings_merge): every key of the tenant through the same
    function, MERGED_KEYS a call; then the table rewritten without the rows merged away, as
    the load leaves every other table (a live table reuses their space for the next appends)."""
    keys = [
        row["key_no"]
        for row in await connection.fetch(
            "SELECT key_no FROM invalidation_keys WHERE tenant_id = $1 ORDER BY key_no", tenant_id
        )
    ]
    for first in range(0, len(keys), MERGED_KEYS):
        progress("merge the postings as the background round does", first, len(keys))
        await connection.fetch(
            "SELECT * FROM lineage_postings_merge_keys($1, $2)",
            tenant_id,
            keys[first : first + MERGED_KEYS],
        )
    progress("merge the postings as the background round does", len(keys), len(keys))
    await connection.execute("VACUUM FULL invalidation_postings")


async def has_column(connection: asyncpg.Connection, table: str, column: str) -> bool:
    found: bool = await connection.fetchval(
        "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = $1::regclass "
        "AND attname = $2 AND NOT attisdropped)",
        table,
        column,
    )
    return found


def arrays(roots: Roots) -> tuple[list[str], list[int]]:
    """A record's root sources as its row keeps them: source_uris in order, depths beside."""
    ordered = sorted(roots.items())
    return [source for source, _ in ordered], [depth for _, depth in ordered]


def root_row(row: Row, source_uri: str, depth: int) -> Row:
    """A row of the side table root_sources (schemas before migration 0036)."""
    return (row[0], source_uri, row[3], row[1], depth, row[COLUMNS.index("created_at")])


async def save_picks(connection: asyncpg.Connection, picks: Picks) -> None:
    await connection.execute("CREATE TABLE IF NOT EXISTS bench_picks (picks jsonb NOT NULL)")
    await connection.execute(
        "INSERT INTO bench_picks VALUES ($1::jsonb)", json.dumps(asdict(picks))
    )


async def saved_picks(url: str) -> Picks | None:
    """The picks of a database this benchmark loaded earlier, or None."""
    try:
        connection = await asyncpg.connect(url)
    except asyncpg.InvalidCatalogNameError:
        return None
    try:
        if not await connection.fetchval("SELECT to_regclass('bench_picks') IS NOT NULL"):
            return None
        value = await connection.fetchval("SELECT picks::text FROM bench_picks LIMIT 1")
    finally:
        await connection.close()
    return Picks(**json.loads(value)) if value else None


async def drop(server_url: str, dbname: str) -> None:
    connection = await asyncpg.connect(server_url)
    try:
        await connection.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    finally:
        await connection.close()
