"""A walk-back is one call of lineage_walk_back (migration 0043); a record read by id is one
of lineage_get_contexts, a trace's records one of lineage_trace_contexts (0044), a page of
records one of lineage_list_contexts (0045), a walk down by id one of lineage_blast_radius
(0052): one statement,
no BEGIN or COMMIT, the answer the tenant transaction gives; the function binds the tenant its
token vouches for, for that statement alone; the request's audit row commits with the read, and
is still written once when the read fails."""

import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from lineage import Derivation, db, derive_many
from lineage.core import DEFAULT_TENANT
from lineage.core.errors import NotFound, WalkTimeout
from lineage.db.database import Database
from lineage.db.named_sql import QUERIES
from lineage.services import audit, auth, reads, records, walks
from lineage.services.demo import ANSWER_ID, TRACE_ID, load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.conftest import database_at

RIVAL = "rival"
CALL = "FROM lineage_walk_back($1, $2, $3, $4, $5)"
RECORD_CALL = "FROM lineage_get_contexts($1, $2, $3, $4)"
TRACE_CALL = "FROM lineage_trace_contexts($1, $2, $3, $4)"
DOWN_CALL = "FROM lineage_blast_radius($1, $2, $3, $4, $5, $6)"
LIST_CALL = "FROM lineage_list_contexts($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
CALLER = auth.Caller(DEFAULT_TENANT, None, "read")


@pytest.fixture
async def sent(
    database_url: str, settings: Settings, owner_database: Database
) -> AsyncIterator[tuple[Database, list[str]]]:
    """The demo incident, and a Database of one connection with every statement that
    connection sends from then on."""
    async with database_at(database_url, settings, max_size=1) as opened:
        await load_incident(PostgresStore(opened))
        await auth.create_tenant(owner_database, RIVAL)
        queries: list[str] = []
        async with opened.pool.acquire() as connection:
            if not connection.one_call_reads or connection.vouching_key is None:
                pytest.skip("this server answers reads in a tenant transaction")
            connection.add_query_logger(lambda logged: queries.append(logged.query))
        await walks.walk_back(opened, settings, DEFAULT_TENANT, ANSWER_ID, None)  # prepared
        queries.clear()
        yield opened, queries


async def test_a_walk_back_is_one_statement_with_the_transactions_answer(
    sent: tuple[Database, list[str]], settings: Settings
) -> None:
    database, queries = sent
    walk = await walks.walk_back(database, settings, DEFAULT_TENANT, ANSWER_ID, None)
    assert len(queries) == 1 and CALL in queries[0]
    async with database.tenant(DEFAULT_TENANT) as tx:
        rows = await tx.fetch("walk_back", context_id=ANSWER_ID, max_depth=20)
    assert walk.nodes == await reads.nodes_from_rows(rows)
    assert len(walk.nodes) > 5


async def test_the_call_binds_the_tenant_its_token_vouches_for_and_for_itself_alone(
    sent: tuple[Database, list[str]], settings: Settings
) -> None:
    database, _ = sent
    with pytest.raises(NotFound):  # the rival's walk does not see the default tenant's records
        await walks.walk_back(database, settings, RIVAL, ANSWER_ID, None)
    async with database.pool.acquire() as connection:
        assert await connection.fetchval("SELECT current_setting('lineage.tenant_id', true)") in (
            None,
            "",
        )
        rival_token = db.tenant_token(connection.vouching_key, RIVAL)
        call = "SELECT count(*) FROM lineage_walk_back($1, $2, 20, $3)"
        for token in (rival_token, None, "0" * 64):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="not vouched for"):
                await connection.fetchval(call, ANSWER_ID, DEFAULT_TENANT, token)
        assert await connection.fetchval(call, ANSWER_ID, RIVAL, rival_token) == 0
    async with database.tenant(DEFAULT_TENANT) as tx:  # called in a transaction of another's
        assert await tx.connection.fetchval(call, ANSWER_ID, RIVAL, rival_token) == 0
        assert await tx.connection.fetchval("SELECT count(*) FROM provenance") > 5
        bound = "SELECT current_setting('lineage.tenant_id'), current_setting('jit')"
        assert tuple(await tx.connection.fetchrow(bound)) == (DEFAULT_TENANT, "on")


async def test_a_walk_reads_every_attribute_as_stored(
    database: Database, settings: Settings
) -> None:
    numbers = {"big": 2**53 - 1, "tenth": 0.1, "tiny": 1e-20, "zero": -0.0, "n": [-(2**53) + 1]}
    [made] = await derive_many(
        PostgresStore(database),
        [Derivation([], "numbers", "document", source_uri="s3://n.md", attributes=numbers)],
    )
    walk = await walks.walk_back(database, settings, DEFAULT_TENANT, made.context_id, None)
    read = walk.nodes[0]["attributes"]
    assert read == numbers
    assert [type(read["big"]), type(read["n"][0])] == [int, int]  # not floats near them


def test_a_record_is_read_from_its_json_exactly() -> None:
    # Integers past 64 bits (stored before attributes were held to RFC 8785's), past a double.
    [fine, big] = walks.records_from_json(
        b'[{"attributes": {"k": 1}}, {"attributes": {"n": [123456789012345678901234567890]}}]'
    )
    assert (fine, big) == (
        {"attributes": {"k": 1}},
        {"attributes": {"n": [123456789012345678901234567890]}},
    )
    assert type(big["attributes"]["n"][0]) is int
    assert walks.records_from_json(b'[{"attributes": {"m": 1e400}}]') == [
        {"attributes": {"m": math.inf}}
    ]


async def audit_rows(database: Database) -> list[tuple[str, str]]:
    async with database.tenant(DEFAULT_TENANT) as tx:
        rows = await tx.connection.fetch("SELECT action, target FROM audit_log ORDER BY audit_id")
    return [(row["action"], row["target"]) for row in rows]


async def test_an_audited_walk_writes_its_row_in_its_one_statement(
    sent: tuple[Database, list[str]], settings: Settings
) -> None:
    database, queries = sent
    async with audit.ride_along(database, CALLER, "walk_back", ANSWER_ID):
        await walks.walk_back(database, settings, DEFAULT_TENANT, ANSWER_ID, None)
    assert len(queries) == 1 and CALL in queries[0]
    assert await audit_rows(database) == [("walk_back", ANSWER_ID)]


async def test_a_walk_cut_short_is_audited_once_and_its_connection_walks_again(
    sent: tuple[Database, list[str]], owner: asyncpg.Connection
) -> None:
    database, _ = sent
    hurried = Settings(statement_timeout_ms=200, auth="none")
    async with owner.transaction():  # the walk waits on this lock past its timeout
        await owner.execute("LOCK TABLE provenance IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(WalkTimeout, match="200 ms statement timeout"):
            async with audit.ride_along(database, CALLER, "walk_back", ANSWER_ID):
                await walks.walk_back(database, hurried, DEFAULT_TENANT, ANSWER_ID, None)
    assert await audit_rows(database) == [("walk_back", ANSWER_ID)]
    walk = await walks.walk_back(database, hurried, DEFAULT_TENANT, ANSWER_ID, None)
    assert walk.nodes[0]["context_id"] == ANSWER_ID


async def test_a_record_read_by_id_is_one_statement_with_the_transactions_answer(
    sent: tuple[Database, list[str]], settings: Settings
) -> None:
    database, queries = sent
    node = await records.record_node(database, settings, DEFAULT_TENANT, ANSWER_ID)
    assert len(queries) == 1 and RECORD_CALL in queries[0]
    async with database.tenant(DEFAULT_TENANT) as tx:
        rows = await tx.fetch("get_contexts", context_ids=[ANSWER_ID])
    assert [node] == await reads.nodes_from_rows(rows)
    assert node["context_id"] == ANSWER_ID and node["kind"] == "answer"
    with pytest.raises(NotFound):  # the rival does not see the default tenant's record
        await records.record_node(database, settings, RIVAL, ANSWER_ID)
    async with database.pool.acquire() as connection:
        call = "SELECT count(*) FROM lineage_get_contexts($1, $2, $3)"
        rival_token = db.tenant_token(connection.vouching_key, RIVAL)
        for token in (rival_token, None):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="not vouched for"):
                await connection.fetchval(call, DEFAULT_TENANT, [ANSWER_ID], token)
        assert await connection.fetchval(call, RIVAL, [ANSWER_ID], rival_token) == 0


async def test_an_audited_record_read_writes_its_row_in_its_one_statement(
    sent: tuple[Database, list[str]], settings: Settings
) -> None:
    database, queries = sent
    async with audit.ride_along(database, CALLER, "get_context", ANSWER_ID):
        await records.record_node(database, settings, DEFAULT_TENANT, ANSWER_ID)
    assert len(queries) == 1 and RECORD_CALL in queries[0]
    assert await audit_rows(database) == [("get_context", ANSWER_ID)]


async def test_a_traces_records_are_one_statement_with_the_transactions_answer(
    sent: tuple[Database, list[str]], settings: Settings
) -> None:
    database, queries = sent
    found = await reads.trace_records(database, settings, DEFAULT_TENANT, TRACE_ID)
    assert len(queries) == 1 and TRACE_CALL in queries[0]
    async with database.tenant(DEFAULT_TENANT) as tx:
        rows = await tx.fetch("trace_contexts", trace_id=TRACE_ID)
    assert found == await reads.nodes_from_rows(rows)
    assert len(found) > 3 and {node["trace_id"] for node in found} == {TRACE_ID}
    assert await reads.trace_records(database, settings, RIVAL, TRACE_ID) == []


async def test_a_walk_down_is_one_statement_with_the_transactions_answer(
    sent: tuple[Database, list[str]], settings: Settings, owner: asyncpg.Connection
) -> None:
    database, queries = sent
    down = {"context_ids": ["doc_contractors_v1"], "kind": "all", "max_depth": 20}
    found = await walks.impact_nodes(
        database, settings, "context_ids", tenant_id=DEFAULT_TENANT, **down
    )
    assert len(queries) == 1 and DOWN_CALL in queries[0]
    async with database.tenant(DEFAULT_TENANT) as tx:
        rows = await tx.fetch("blast_radius", **down)
    assert found == await reads.nodes_from_rows(rows)
    assert ANSWER_ID in {node["context_id"] for node in found} and len(found) > 5
    rival = await walks.impact_nodes(database, settings, "context_ids", tenant_id=RIVAL, **down)
    assert rival == []
    async with database.pool.acquire() as connection:
        call = "SELECT count(*) FROM lineage_blast_radius(20, $1, $2, 'all', $3)"
        rival_token = db.tenant_token(connection.vouching_key, RIVAL)
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="not vouched for"):
            await connection.fetchval(call, ["doc_contractors_v1"], DEFAULT_TENANT, rival_token)
    # Planned once per session: a walk's plan does not depend on the ids it starts from.
    config = await owner.fetchval(
        "SELECT proconfig FROM pg_proc WHERE proname = 'lineage_blast_radius'"
    )
    assert "plan_cache_mode=force_generic_plan" in config


async def test_a_walk_down_by_id_in_a_transaction_is_planned_once_there(
    sent: tuple[Database, list[str]], settings: Settings
) -> None:
    # The ids file and pages read in a tenant transaction: a walk down by id is planned
    # generically there, as in lineage_blast_radius, and the setting ends with the transaction.
    database, queries = sent
    down = {"context_ids": ["doc_contractors_v1"], "kind": "all", "max_depth": 20}
    found = walks.impact_ids(database, settings, "context_ids", tenant_id=DEFAULT_TENANT, **down)
    assert ANSWER_ID in {node["context_id"] async for node in found}
    assert [q for q in queries if "plan_cache_mode = force_generic_plan" in q]
    queries.clear()
    by_source = {"source_uri": "s3://policies/contractors.md", "kind": "all", "max_depth": 20}
    found = walks.impact_ids(
        database, settings, "source_uri", tenant_id=DEFAULT_TENANT, **by_source
    )
    assert ANSWER_ID in {node["context_id"] async for node in found}
    assert queries and not [q for q in queries if "plan_cache_mode" in q]
    async with database.pool.acquire() as connection:
        assert await connection.fetchval("SHOW plan_cache_mode") == "auto"


def page(after: tuple[datetime, str] | None = None, **filters: str) -> dict[str, Any]:
    """list_contexts' values: every filter 'any' but those given, two records a page."""
    earliest, latest = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
    filtered = ("kind", "source_uri", "trace_id", "produced_by", "session_id")
    return {
        **dict.fromkeys(filtered, "any"),
        **filters,
        "since": earliest,
        "until": latest,
        "after_created_at": after[0] if after else earliest,
        "after_context_id": after[1] if after else "",
        "page_size": 2,
    }


async def test_a_page_of_records_is_one_statement_with_the_transactions_answer(
    sent: tuple[Database, list[str]], settings: Settings
) -> None:
    database, queries = sent
    pages: list[list[dict[str, Any]]] = []
    after = None
    while not pages or len(pages[-1]) == 2:
        queries.clear()
        found = await reads.list_contexts(
            database, settings, tenant_id=DEFAULT_TENANT, **page(after, trace_id=TRACE_ID)
        )
        assert len(queries) == 1 and LIST_CALL in queries[0]
        async with database.tenant(DEFAULT_TENANT) as tx:
            rows = await tx.fetch("list_contexts", **page(after, trace_id=TRACE_ID))
        assert found == await reads.nodes_from_rows(rows)
        pages.append(found)
        if found:
            after = (rows[-1]["created_at"], rows[-1]["context_id"])
    listed = [node for found in pages for node in found]
    traced = await reads.trace_records(database, settings, DEFAULT_TENANT, TRACE_ID)
    assert [node["context_id"] for node in listed] == [node["context_id"] for node in traced]
    assert len(pages) > 2
    rival = await reads.list_contexts(database, settings, tenant_id=RIVAL, **page())
    assert rival == []


async def test_a_page_is_planned_for_its_filters_and_audited_in_its_one_statement(
    sent: tuple[Database, list[str]], settings: Settings, owner: asyncpg.Connection
) -> None:
    # A generic plan keeps every 'any' filter and reads each record of the tenant through it.
    config = await owner.fetchval(
        "SELECT proconfig FROM pg_proc WHERE proname = 'lineage_list_contexts'"
    )
    assert "plan_cache_mode=force_custom_plan" in config
    database, queries = sent
    async with audit.ride_along(database, CALLER, "list_contexts", ANSWER_ID):
        [node] = await reads.list_contexts(
            database, settings, tenant_id=DEFAULT_TENANT, **page(kind="answer")
        )
    assert len(queries) == 1 and LIST_CALL in queries[0]
    assert node["context_id"] == ANSWER_ID
    assert await audit_rows(database) == [("list_contexts", ANSWER_ID)]


async def test_each_function_takes_its_statements_parameters_in_their_order(
    owner: asyncpg.Connection,
) -> None:
    # The statement inside reads them by position ($n in order of first use in the file): a
    # reordered file would hand the function's since to its until, with no type to object.
    for name, function in reads.ONE_CALL.items():
        names = await owner.fetchval(
            "SELECT proargnames FROM pg_proc WHERE proname = $1 AND proargmodes IS NOT NULL",
            function,
        )
        taken = [n.removeprefix("p_") for n in names[: len(QUERIES[name].parameters) + 2]]
        assert taken == [*QUERIES[name].parameters, "token", "audit"], function
