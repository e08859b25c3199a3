"""Any named read of a tenant's records (a walk, a list, a trace), run under the read
settings: the statement timeout, and a WalkTimeout that says which setting to raise."""

import asyncio
import contextlib
import functools
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractAsyncContextManager, aclosing
from datetime import UTC, datetime
from typing import Any

import asyncpg

from lineage import db
from lineage.core import DEFAULT_TENANT, metrics
from lineage.core.errors import WalkTimeout
from lineage.core.record import format_timestamp
from lineage.db.database import Database, Transaction
from lineage.db.named_sql import QUERIES
from lineage.settings import Settings


def node_from_row(row: asyncpg.Record) -> dict[str, Any]:
    """A row as JSON-ready values: timestamps as text, composite values as lists."""
    return _node(row, _conversions([row]))


def _conversions(rows: list[asyncpg.Record]) -> list[tuple[str, Callable[[Any], Any]]]:
    """The columns of `rows` to convert, each with its conversion: a column has one type, so
    its first value that is not null decides."""
    conversions: list[tuple[str, Callable[[Any], Any]]] = []
    for index, key in enumerate(rows[0].keys() if rows else ()):
        value = next((row[index] for row in rows if row[index] is not None), None)
        if isinstance(value, datetime):
            conversions.append((key, format_timestamp))
        elif isinstance(value, tuple):
            conversions.append((key, list))
    return conversions


def _node(
    row: asyncpg.Record, conversions: list[tuple[str, Callable[[Any], Any]]]
) -> dict[str, Any]:
    node = dict(row)
    for key, convert in conversions:
        if node[key] is not None:
            node[key] = convert(node[key])
    return node


ROWS_PER_TURN = 256


async def nodes_from_rows(rows: list[asyncpg.Record]) -> list[dict[str, Any]]:
    """node_from_row of each row, its columns' types looked at once for all of them (a list of
    35,000 ids took 65 ms row by row), giving the event loop a turn every ROWS_PER_TURN rows: a
    walk of thousands held it for tens of milliseconds, and other tenants' requests waited."""
    conversions = _conversions(rows)
    nodes: list[dict[str, Any]] = []
    for start in range(0, len(rows), ROWS_PER_TURN):
        if start:
            await asyncio.sleep(0)
        nodes.extend(_node(row, conversions) for row in rows[start : start + ROWS_PER_TURN])
    return nodes


def _timeout_message(name: str, settings: Settings) -> str:
    return (
        f"{name} ran past the {settings.statement_timeout_ms} ms statement timeout and has no "
        "complete answer; raise LINEAGE_STATEMENT_TIMEOUT_MS for this question"
    )


async def run(
    database: Database, settings: Settings, name: str, **values: Any
) -> list[dict[str, Any]]:
    """Run one named query under the walk settings (timeout, no JIT) and return its rows."""
    return await nodes_from_rows(await _fetch(database, settings, name, values))


# The named reads that a function answers in one call, the tenant bound in it (migrations
# 0043-0045, 0052): the function's statement is the query's (named_sql.fill_statements).
ONE_CALL = {
    "walk_back": "lineage_walk_back",
    "blast_radius": "lineage_blast_radius",
    "get_contexts": "lineage_get_contexts",
    "trace_contexts": "lineage_trace_contexts",
    "list_contexts": "lineage_list_contexts",
}


# The named reads whose plan does not depend on their values: planned once per connection
# (generic plans) in a tenant transaction on plain PostgreSQL, as lineage_blast_radius plans its
# statement. A fresh plan of a walk down by id took as long as a typical walk (0.3-0.5 ms).
GENERIC_PLANS = frozenset({"blast_radius", "blast_radius_ids"})


def _read_transaction(
    database: Database, settings: Settings, name: str, values: dict[str, Any]
) -> AbstractAsyncContextManager[Transaction]:
    """The tenant transaction the named read `name` runs in, under the walk settings."""
    return database.tenant(
        values.get("tenant_id", DEFAULT_TENANT),
        statement_timeout_ms=settings.statement_timeout_ms,
        generic_plans=name in GENERIC_PLANS,
    )


@functools.cache
def one_call_sql(name: str, arguments: int, over: str = "{}") -> str:
    """The statement that reads the named query `name` in one call of its function (its
    `arguments`, then the tenant's token and the audit row), or `over`, a select over it."""
    placeholders = ", ".join(f"${n}" for n in range(1, arguments + 3))
    return over.format(f"SELECT * FROM {ONE_CALL[name]}({placeholders})")


async def _fetch(
    database: Database, settings: Settings, name: str, values: dict[str, Any], over: str = "{}"
) -> list[asyncpg.Record]:
    """The rows of the named query `name` (or of `over`, a select over it), under the walk
    settings: in one call of its function where it has one and the database can, else in the
    tenant's transaction."""
    arguments = QUERIES[name].arguments(values)
    tenant_id = values.get("tenant_id", DEFAULT_TENANT)
    try:
        with metrics.time_walk(name):
            if name in ONE_CALL:
                call = one_call_sql(name, len(arguments), over)
                timeout_s = settings.statement_timeout_ms / 1000 or None  # 0: none, as SET's
                answered = await database.fetch_one_call(tenant_id, call, arguments, timeout_s)
                if answered is not None:
                    return answered
            async with _read_transaction(database, settings, name, values) as tx:
                rows: list[asyncpg.Record] = await tx.connection.fetch(
                    over.format(QUERIES[name].sql), *arguments
                )
    except (asyncpg.QueryCanceledError, TimeoutError) as exc:
        raise WalkTimeout(_timeout_message(name, settings)) from exc
    return rows


async def run_together(
    database: Database, settings: Settings, tenant_id: str, *queries: tuple[str, dict[str, Any]]
) -> list[list[dict[str, Any]]]:
    """Run named queries in one tenant transaction under the walk settings; each one's rows."""
    answers: list[list[dict[str, Any]]] = []
    try:
        async with database.tenant(
            tenant_id, statement_timeout_ms=settings.statement_timeout_ms
        ) as tx:
            for name, values in queries:
                with metrics.time_walk(name):
                    rows = await db.fetch(tx.connection, name, tenant_id=tenant_id, **values)
                answers.append(await nodes_from_rows(rows))
    except asyncpg.QueryCanceledError as exc:
        raise WalkTimeout(_timeout_message(queries[-1][0], settings)) from exc
    return answers


async def run_as_psql(
    database: Database, settings: Settings, name: str, variables: dict[str, str]
) -> list[dict[str, Any]]:
    """Run a named query given its psql variables as text (`lineage sql run`): each becomes the
    type the query declares for it."""
    query = QUERIES[name]
    async with database.connection() as connection:
        statement = await connection.prepare(query.sql)
        types = ["array" if t.kind == "array" else t.name for t in statement.get_parameters()]
    values = {p: _convert(variables[p], t) for p, t in zip(query.parameters, types, strict=True)}
    return await run(database, settings, name, **values)


def _convert(text: str, type_name: str) -> Any:
    """psql variables are text; bind parameters want the type the query declares."""
    if type_name in {"int2", "int4", "int8"}:
        return int(text)
    if type_name == "timestamptz":
        bounds = {"-infinity": datetime.min, "infinity": datetime.max}
        moment = bounds.get(text) or datetime.fromisoformat(text)
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    if type_name == "array":
        return [item.strip().strip('"') for item in text.strip("{}").split(",") if item.strip()]
    return text


async def list_contexts(
    database: Database, settings: Settings, **filters: Any
) -> list[dict[str, Any]]:
    """A page of the tenant's records matching every filter, oldest first."""
    return await run(database, settings, "list_contexts", **filters)


async def records_by_id(
    database: Database, settings: Settings, tenant_id: str, context_ids: list[str]
) -> list[dict[str, Any]]:
    """The tenant's records among these ids; unknown and foreign ids are simply absent."""
    return await run(
        database, settings, "get_contexts", tenant_id=tenant_id, context_ids=context_ids
    )


async def trace_records(
    database: Database, settings: Settings, tenant_id: str, trace_id: str
) -> list[dict[str, Any]]:
    """Every record of one trace."""
    return await run(database, settings, "trace_contexts", tenant_id=tenant_id, trace_id=trace_id)


async def stream(
    database: Database, settings: Settings, name: str, **values: Any
) -> AsyncGenerator[dict[str, Any], None]:
    """The same, node by node through a server-side cursor, so memory stays bounded."""
    query = QUERIES[name]
    async with aclosing(_cursor(database, settings, name, query.sql, values)) as batches:
        async for rows in batches:
            conversions = _conversions(rows)
            for row in rows:
                yield _node(row, conversions)


# Each record of a radius as its JSON, written by the database: the keys of node_from_row in
# its order, created_at as format_timestamp writes it. A record then costs the server one bytes
# value rather than a row decoded and encoded again (5 us of its CPU a record against 17, for
# 21k answers); kind, truncated and expired are read for the summary. row_to_json of the
# columns, not json_build_object: 14% less time and 8% fewer bytes for 212,500 records.
RECORD_COLUMNS = """SELECT context_id, depth, kind, parent_ids, source_uri, content_hash, transform,
             transform_version, produced_by, index_snapshot, trace_id,
             to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at,
             attributes, truncated, expired
      FROM (\n{}\n) AS node"""
RECORD_JSON_SELECT = (
    """SELECT r.kind, r.truncated, r.expired,
       convert_to(row_to_json(r)::text, 'UTF8') AS record
FROM ("""
    + RECORD_COLUMNS
    + ") AS r"
)
# The same records as one JSON array in their order (null for none): one row to fetch and one
# document to decode, 0.05 ms less than a row each for a walk-back of 21 records.
RECORDS_JSON_ARRAY = (
    "SELECT convert_to(json_agg(r)::text, 'UTF8') AS records FROM (" + RECORD_COLUMNS + ") AS r"
)


async def record_json(
    database: Database, settings: Settings, name: str, **values: Any
) -> AsyncGenerator[tuple[dict[str, Any], bytes], None]:
    """A radius's records (a query with the columns of sql/blast_radius.sql) as JSON, each
    with its kind, truncated and expired, row by row, so memory stays bounded."""
    sql = RECORD_JSON_SELECT.format(QUERIES[name].sql)
    async with aclosing(_cursor(database, settings, name, sql, values)) as batches:
        async for rows in batches:
            for kind, truncated, expired, record in rows:
                yield {"kind": kind, "truncated": truncated, "expired": expired}, record


# The columns of a blast radius written out for a deletion or cache-invalidation job.
ID_FILE_COLUMNS = ("context_id", "kind", "depth", "truncated")
# Each id of a radius as the JSON object of an ids file (ID_FILE_COLUMNS), written by the
# database, with its kind, truncated and expired for the file's summary.
ID_JSON_SELECT = (
    "SELECT i.kind, i.truncated, i.expired, convert_to(row_to_json(r)::text, 'UTF8')\n"
    "FROM (\n{}\n) AS i\n"
    f"CROSS JOIN LATERAL (SELECT {', '.join(f'i.{c}' for c in ID_FILE_COLUMNS)}) AS r"
)


async def id_json(
    database: Database, settings: Settings, name: str, **values: Any
) -> AsyncGenerator[list[tuple[dict[str, Any], bytes]], None]:
    """A radius's ids (a query with the columns of sql/blast_radius_ids.sql) as the JSON the
    database writes, each with its kind, truncated and expired, a batch at a time: made node by
    node in Python, the JSON file of 3,542 ids took 48 ms against the CSV's 8-11; so, 12."""
    sql = ID_JSON_SELECT.format(QUERIES[name].sql)
    async with aclosing(_cursor(database, settings, name, sql, values)) as batches:
        async for rows in batches:
            yield [
                ({"kind": kind, "truncated": truncated, "expired": expired}, made)
                for kind, truncated, expired, made in rows
            ]


async def fetch_records_json(
    database: Database, settings: Settings, name: str, **values: Any
) -> bytes | None:
    """record_json's records as one JSON array, None when there are none: no Python loop over
    them runs on the event loop (for a worker process to decode: walks.walk_back_json)."""
    [row] = await _fetch(database, settings, name, values, RECORDS_JSON_ARRAY)
    records: bytes | None = row["records"]
    return records


# Rows a server-side cursor fetches at a time; its readers take each batch whole.
ROWS_PER_FETCH = 1000


async def _cursor(
    database: Database, settings: Settings, name: str, sql: str, values: dict[str, Any]
) -> AsyncGenerator[list[asyncpg.Record], None]:
    """The rows of `sql` (the named query `name`, or a select over it) through a server-side
    cursor in the tenant's transaction, under the walk settings, ROWS_PER_FETCH at a time."""
    try:
        async with _read_transaction(database, settings, name, values) as tx:
            arguments = QUERIES[name].arguments(values)
            cursor = await tx.connection.cursor(sql, *arguments)
            while rows := await cursor.fetch(ROWS_PER_FETCH):
                yield rows
    except asyncpg.QueryCanceledError as exc:
        raise WalkTimeout(_timeout_message(name, settings)) from exc


# An ids file's lines as the server writes them: a large radius's ids (206k answers of the
# hottest document at 10M) reach the caller without a row decoded in Python. The booleans read
# True/False, as the streamed files' do.
ID_FILE_SELECT = "SELECT context_id, kind, depth, initcap(truncated::text) FROM (\n{}\n) AS ids"
# COPY chunks held between the database and a slow caller: memory stays bounded.
COPY_CHUNKS_HELD = 8


async def copy_id_file(
    database: Database, settings: Settings, name: str, **values: Any
) -> AsyncGenerator[bytes, None]:
    """A walk's (context_id, kind, depth, truncated) rows as CSV lines ending in CRLF, copied
    out by the server (COPY ... TO STDOUT) inside the tenant's transaction, chunk by chunk."""
    query = QUERIES[name]
    chunks: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue(COPY_CHUNKS_HELD)

    async def copy_out() -> None:
        try:
            async with _read_transaction(database, settings, name, values) as tx:
                await tx.connection.copy_from_query(
                    ID_FILE_SELECT.format(query.sql),
                    *query.arguments(values),
                    output=chunks.put,
                    format="csv",
                )
        except Exception as exc:  # the caller's side raises it
            await chunks.put(exc)
            return
        await chunks.put(None)

    copying = asyncio.create_task(copy_out())
    try:
        while (chunk := await chunks.get()) is not None:
            if isinstance(chunk, asyncpg.QueryCanceledError):
                raise WalkTimeout(_timeout_message(name, settings)) from chunk
            if isinstance(chunk, BaseException):
                raise chunk
            yield bytes(chunk).replace(b"\n", b"\r\n")  # no id or kind holds a line break
    finally:
        copying.cancel()  # the caller went away: the COPY is cancelled, the transaction ends
        with contextlib.suppress(asyncio.CancelledError):
            await copying
