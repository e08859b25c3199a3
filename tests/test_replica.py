"""Reads on a streaming replica (LINEAGE_READ_DATABASE_URL): a private primary, a real hot
standby made from it with `pg_basebackup -R`, and every GET route of the OpenAPI schema through
an app that reads the standby: no 5xx, the primary's bodies once the standby has caught up,
nothing read on the primary, and every read's audit row on the primary, even while the primary
is down."""

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from lineage import derive
from lineage.api.app import create_app
from lineage.db.migrate import migrate
from lineage.services import audit, auth
from lineage.services.demo import ANSWER_ID, CONTRACTOR_POLICY, TRACE_ID, load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests import live_server
from tests.conftest import database_at
from tests.private_postgres import PrivatePostgres

# Starts servers or browsers of its own: outside the fast tier.
pytestmark = pytest.mark.slow

TENANT = "acme"
HANG_GUARD_S = 30.0
# Routes whose bodies change with every call (counters, the audit of the calls themselves).
VOLATILE = {"/metrics", "/v1/audit"}
# Writes: it integrates the log and signs, on the primary.
WRITES = {"/v1/log/checkpoint"}
METRICS_TOKEN = "scraper-token"
REQUEST_ID = "req-1"
PATH_VALUES = {
    "context_id": ANSWER_ID,
    "answer_id": ANSWER_ID,
    "trace_id": TRACE_ID,
    "request_id": REQUEST_ID,
}


@dataclass
class Replicated:
    primary: PrivatePostgres
    standby: PrivatePostgres
    token: str  # an admin key of TENANT
    tree_size: int
    data_dir: Path  # the keys every app shares, as every process of a deployment must

    async def caught_up(self) -> None:
        """Wait until the standby has replayed everything the primary has written so far."""
        primary = await asyncpg.connect(self.primary.url)
        try:
            target = await primary.fetchval("SELECT pg_current_wal_lsn()")
        finally:
            await primary.close()
        standby = await asyncpg.connect(self.standby.url)
        try:
            async with asyncio.timeout(HANG_GUARD_S):
                query = "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn"
                while not await standby.fetchval(query, target):  # noqa: ASYNC110 (polled)
                    await asyncio.sleep(0.02)
        finally:
            await standby.close()


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[PrivatePostgres, ...]]:
    # Every statement the primary runs goes to its log: the reads must not be among them.
    primary = PrivatePostgres(settings={"log_statement": "'all'"})
    try:
        primary.start()
        migrate(primary.url)
        standby = PrivatePostgres(settings={"log_statement": "'none'"}, standby_of=primary)
        try:
            standby.start()
            yield primary, standby
        finally:
            standby.destroy()
    finally:
        primary.destroy()


def settings_for(standby: PrivatePostgres | None, data_dir: Path) -> Settings:
    return Settings(
        auth="keys",
        log_interval_s=0,  # no background log rounds on the primary while reads are watched
        bad_request_limit=1000,
        read_database_url=standby.url if standby is not None else None,
        metrics_token=METRICS_TOKEN,
        data_dir=data_dir,
    )


@pytest.fixture(scope="module")
async def replicated(
    servers: tuple[PrivatePostgres, PrivatePostgres],
    tmp_path_factory: pytest.TempPathFactory,
) -> Replicated:
    primary, standby = servers
    async with database_at(primary.url, as_owner=True) as owner:
        await auth.create_tenant(owner, TENANT)
    async with database_at(primary.url) as database:
        token, _ = await auth.create_key(database, TENANT, "admin")
        await load_incident(PostgresStore(database, TENANT))
    data_dir = tmp_path_factory.mktemp("primary-app")
    async with app_client(settings_for(None, data_dir), primary) as http:
        query = {"request_id": REQUEST_ID, "query": "notice period?", "answer": "30 days"}
        recorded = await http.post("/v1/queries", json=query, headers=bearer(token))
        assert recorded.status_code == 201, recorded.text
        checkpoint = await http.get("/v1/log/checkpoint", headers=bearer(token))
        assert checkpoint.status_code == 200, checkpoint.text
    found = Replicated(primary, standby, token, checkpoint.json()["tree_size"], data_dir)
    await found.caught_up()
    return found


@asynccontextmanager
async def app_client(
    settings: Settings, primary: PrivatePostgres
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, database_url=primary.url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as http:
            yield http


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def get_routes(
    paths: dict[str, dict[str, Any]], tree_size: int
) -> list[tuple[str, str, dict[str, str]]]:
    """Every GET of the schema but the event stream (tested below): (path, URL, query)."""
    queries = {
        "/v1/impact": {"source_uri": CONTRACTOR_POLICY},
        "/v1/freshness": {"source_uri": CONTRACTOR_POLICY},
        "/v1/impact/page": {"source_uri": CONTRACTOR_POLICY},
        "/v1/impact/ids": {"source_uri": CONTRACTOR_POLICY},  # CSV: copied out (COPY)
        "/v1/log/proof/inclusion": {"context_id": ANSWER_ID, "tree_size": str(tree_size)},
        "/v1/log/proof/consistency": {"first": "1", "second": str(tree_size)},
    }
    found = []
    for path, operations in paths.items():
        if "get" not in operations or path == "/v1/events":
            continue
        url = path
        for name in re.findall(r"{(\w+)}", path):
            url = url.replace(f"{{{name}}}", PATH_VALUES[name])
        required = [p["name"] for p in operations["get"].get("parameters", []) if p["required"]]
        given = queries.get(path, {})
        missing = [name for name in required if name not in given and f"{{{name}}}" not in path]
        assert not missing, f"add query values for {path}: {missing}"
        found.append((path, url, given))
    return found


def neutral(text: str) -> str:
    return re.sub(r'"(generated_at|elapsed_ms)":\s*"?[^,}"]*"?', r'"\1":"T"', text)


def primary_statements(log: str, start: str, end: str) -> str:
    """What the primary's log shows between two marker statements."""
    return log[log.index(start) : log.index(end)]


async def mark(primary: PrivatePostgres, marker: str) -> None:
    connection = await asyncpg.connect(primary.url)
    try:
        await connection.execute(f"SELECT '{marker}'")
    finally:
        await connection.close()


async def audit_count(url: str) -> int:
    connection = await asyncpg.connect(url)  # the owner, past row security
    try:
        count: int = await connection.fetchval(
            "SELECT count(*) FROM audit_log WHERE tenant_id = $1", TENANT
        )
    finally:
        await connection.close()
    return count


async def data_tables(primary: PrivatePostgres) -> list[str]:
    """The tables a read route may read: all but keys, audit, counters and tenants."""
    connection = await asyncpg.connect(primary.url)
    try:
        rows = await connection.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    finally:
        await connection.close()
    writes = {"api_keys", "audit_log", "tenant_counters", "tenants", "alembic_version"}
    return sorted(row["tablename"] for row in rows if row["tablename"] not in writes)


async def test_every_get_route_reads_the_standby_and_audits_on_the_primary(
    replicated: Replicated, tmp_path: Path
) -> None:
    def headers_for(path: str) -> dict[str, str]:
        return bearer(METRICS_TOKEN if path == "/metrics" else replicated.token)

    primary, standby = replicated.primary, replicated.standby
    async with (
        app_client(settings_for(standby, replicated.data_dir), primary) as on_replica,
        app_client(settings_for(None, replicated.data_dir), primary) as on_primary,
    ):
        schema = create_app(settings_for(standby, tmp_path)).openapi()
        routes = get_routes(schema["paths"], replicated.tree_size)
        assert len(routes) >= 20, routes
        audited_before = await audit_count(primary.url)
        bodies: dict[str, str] = {}
        await mark(primary, "replica-reads-begin")
        for path, url, query in routes:
            if path in WRITES:
                continue
            response = await on_replica.get(url, params=query, headers=headers_for(path))
            assert response.status_code < 500, (path, response.text)
            assert response.status_code == 200, (path, response.text)
            bodies[path] = response.text
        await mark(primary, "replica-reads-end")
        audited = await audit_count(primary.url) - audited_before
        assert audited == sum(1 for path in bodies if path.startswith("/v1/"))
        await replicated.caught_up()
        for path, url, query in routes:
            if path in VOLATILE or path in WRITES:
                continue
            from_primary = await on_primary.get(url, params=query, headers=headers_for(path))
            assert from_primary.status_code == 200, (path, from_primary.text)
            assert neutral(bodies[path]) == neutral(from_primary.text), path
        written = await on_replica.get("/v1/log/checkpoint", headers=headers_for(""))
        assert written.status_code == 200, written.text
    log = primary.log.read_text()
    seen_on_primary = primary_statements(log, "replica-reads-begin", "replica-reads-end")
    assert "audit_log" in seen_on_primary  # the reads' audit rows were written there
    read_there = [
        table for table in await data_tables(primary) if re.search(rf"\b{table}\b", seen_on_primary)
    ]
    assert read_there == [], f"read routes read {read_there} on the primary"
    assert await audit_count(standby.url) == await audit_count(primary.url)


async def test_the_event_stream_reads_the_standby_and_listens_on_the_primary(
    replicated: Replicated, tmp_path: Path
) -> None:
    app = create_app(
        settings_for(replicated.standby, tmp_path), database_url=replicated.primary.url
    )
    async with database_at(replicated.primary.url) as database:
        with live_server.serve(app) as url:
            async with (
                httpx.AsyncClient(base_url=url, timeout=HANG_GUARD_S) as http,
                http.stream("GET", "/v1/events", headers=bearer(replicated.token)) as response,
            ):
                assert response.status_code == 200
                lines = response.aiter_lines()
                async with asyncio.timeout(HANG_GUARD_S):
                    assert (await anext(lines)).startswith(": stream open")
                    store = PostgresStore(database, TENANT)
                    new = await derive(store, [], "fresh", "document", "loader", "1",
                                       source_uri="s3://fresh")  # fmt: skip
                    async for line in lines:
                        if line.startswith("data:"):
                            assert json.loads(line.removeprefix("data:"))["context_id"] == (
                                new.context_id
                            )
                            break


async def test_a_read_goes_on_while_the_primary_is_down_and_its_audit_row_waits(
    replicated: Replicated, tmp_path: Path
) -> None:
    settings = settings_for(replicated.standby, tmp_path)
    async with app_client(settings, replicated.primary) as on_replica:
        before = await audit_count(replicated.primary.url)
        replicated.primary.stop()
        try:
            response = await on_replica.get(
                f"/v1/contexts/{ANSWER_ID}", headers=bearer(replicated.token)
            )
            assert response.status_code == 200, response.text
            assert audit.spooled_entries(settings) == 1
        finally:
            replicated.primary.start()
        async with database_at(replicated.primary.url) as database:
            assert await audit.drain(database, settings) == 1
        assert audit.spooled_entries(settings) == 0
    assert await audit_count(replicated.primary.url) == before + 1
    connection = await asyncpg.connect(replicated.primary.url)
    try:
        row = await connection.fetchrow(
            "SELECT action, target, key_id FROM audit_log WHERE tenant_id = $1 "
            "ORDER BY audit_id DESC LIMIT 1",
            TENANT,
        )
    finally:
        await connection.close()
    assert (row["action"], row["target"]) == ("get_context", ANSWER_ID)
    assert row["key_id"] == replicated.token.split("_")[1]
