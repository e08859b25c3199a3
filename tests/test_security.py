"""Tenants, scoped keys, row-level security, audit and input limits, on a real PostgreSQL.

Two tenants: `acme` holds the demo incident, `rival` probes it through every endpoint and
through the database as the application role, and must learn nothing. The isolation probes
run on Citus too (a fresh database on the private cluster, placed by `lineage distribute`).
"""

import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import pytest
from typer.testing import CliRunner

from lineage import cli, db
from lineage.api.app import create_app
from lineage.core.gateway import record_query
from lineage.core.record import MAX_ATTRIBUTES_BYTES, MAX_PARENTS
from lineage.db.database import Database
from lineage.db.distribute import distribute
from lineage.db.migrate import migrate
from lineage.services import auth
from lineage.services.demo import TRACE_ID, load_incident
from lineage.settings import Settings, effective_auth
from lineage.store.postgres import PostgresStore
from tests.citus_cluster import CitusCluster
from tests.conftest import janitor, url_for

TENANT_TABLES = (
    "tenants", "provenance", "transform_versions", "context_text", "tenant_settings",
    "api_keys", "audit_log", "invalidation_postings", "provenance_children",
)  # fmt: skip
UNKNOWN_ID = "ctx_00000000000000000000000000000000"
UNKNOWN_TRACE = "0" * 31 + "1"


# The isolation probes, on plain PostgreSQL and on Citus.
ON_BOTH = pytest.mark.parametrize(
    "backend",
    ["postgresql", pytest.param("citus", marks=[pytest.mark.citus, pytest.mark.slow])],
    indirect=True,
)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "postgresql"))


@pytest.fixture
def database_url(
    backend: str, template_db: tuple[str, str], request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh database: a copy of the migrated template, or on Citus one migrated and
    distributed for the test (dropped from every node afterwards)."""
    name = f"lineage_test_{uuid.uuid4().hex[:12]}"
    if backend == "citus":
        cluster: CitusCluster = request.getfixturevalue("citus")
        url = cluster.create_database(name)
        migrate(url)
        distribute(url)
        try:
            yield url
        finally:
            cluster.drop_database(name)
        return
    base, template = template_db
    with janitor(base, name, template):
        yield url_for(base, name)


@dataclass
class Tenants:
    keys: dict[str, str]  # "<tenant>:<scope>" -> bearer token


@pytest.fixture
async def tenants(database: Database, owner_database: Database) -> Tenants:
    keys = {}
    for tenant in ("acme", "rival"):
        assert await auth.create_tenant(owner_database, tenant)
        for scope in auth.SCOPES:
            token, _ = await auth.create_key(database, tenant, scope, f"{tenant} {scope}")
            keys[f"{tenant}:{scope}"] = token
    await load_incident(PostgresStore(database, "acme"))
    recorded = await record_query(
        PostgresStore(database, "acme"), "req-1", query="q", answer="a", evidence=["chunk_42"]
    )
    assert recorded is not None
    return Tenants(keys)


@pytest.fixture
def keyed_settings() -> Settings:
    return Settings(statement_timeout_ms=5000, auth="keys", bad_request_limit=1000)


@pytest.fixture
async def http(database_url: str, keyed_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(keyed_settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as client:
            yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# --- modes and keys ----------------------------------------------------------------------------


def test_no_keys_only_for_the_embedded_database_on_loopback() -> None:
    assert effective_auth(Settings(), embedded=True) == "none"
    assert effective_auth(Settings(), embedded=False) == "keys"
    assert effective_auth(Settings(host="0.0.0.0"), embedded=True) == "keys"
    assert effective_auth(Settings(auth="keys"), embedded=True) == "keys"
    assert effective_auth(Settings(auth="none"), embedded=False) == "none"


async def test_missing_wrong_malformed_and_revoked_keys_get_401(
    tenants: Tenants, http: httpx.AsyncClient, database: Database
) -> None:
    good = tenants.keys["acme:read"]
    key_id = good.split("_")[1]
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    for headers in ({}, bearer("nonsense"), bearer(forged), {"Authorization": good}):
        response = await http.get("/v1/contexts/answer_1", headers=headers)
        assert response.status_code == 401, headers
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert "lineage key create" in response.json()["detail"]
    assert (await http.get("/v1/contexts/answer_1", headers=bearer(good))).status_code == 200
    await auth.revoke_key(database, "acme", key_id)
    assert (await http.get("/v1/contexts/answer_1", headers=bearer(good))).status_code == 401
    assert (await http.get("/healthz")).status_code == 200  # health needs no key


async def test_scopes_admit_only_what_they_grant(tenants: Tenants, http: httpx.AsyncClient) -> None:
    record = {"kind": "document", "text": "policy", "source_uri": "s3://scoped.md"}
    expected = {
        "ingest": {"append": 201, "read": 403, "audit": 403},
        "read": {"append": 403, "read": 200, "audit": 403},
        "admin": {"append": 201, "read": 200, "audit": 200},
    }
    for scope, outcomes in expected.items():
        headers = bearer(tenants.keys[f"acme:{scope}"])
        appended = await http.post("/v1/contexts", json=record, headers=headers)
        read = await http.get("/v1/contexts/answer_1/lineage", headers=headers)
        audit = await http.get("/v1/audit", headers=headers)
        got = {"append": appended.status_code, "read": read.status_code, "audit": audit.status_code}
        assert got == outcomes, scope
        if read.status_code == 403:
            # A refused scope says nothing about the data: the same body for any id.
            other = await http.get(f"/v1/contexts/{UNKNOWN_ID}/lineage", headers=headers)
            # Each request's own trace id aside (lineage.api.problems).
            assert other.json() | {"trace_id": "T"} == read.json() | {"trace_id": "T"}


async def test_admin_keys_manage_keys_through_the_api(
    tenants: Tenants, http: httpx.AsyncClient
) -> None:
    admin = bearer(tenants.keys["acme:admin"])
    made = await http.post("/v1/keys", json={"scope": "read", "label": "dashboards"}, headers=admin)
    assert made.status_code == 201
    token = made.json()["key"]
    assert (await http.get("/v1/contexts/answer_1", headers=bearer(token))).status_code == 200
    listed = (await http.get("/v1/keys", headers=admin)).json()["keys"]
    assert made.json()["key_id"] in {k["key_id"] for k in listed}
    assert all("key_hash" not in k and "key" not in k for k in listed)
    gone = await http.delete(f"/v1/keys/{made.json()['key_id']}", headers=admin)
    assert gone.status_code == 204
    assert (await http.get("/v1/contexts/answer_1", headers=bearer(token))).status_code == 401
    # Another tenant's admin cannot revoke it (or learn that it exists).
    rival = bearer(tenants.keys["rival:admin"])
    acme_key = tenants.keys["acme:read"].split("_")[1]
    refused = await http.delete(f"/v1/keys/{acme_key}", headers=rival)
    unknown = await http.delete("/v1/keys/0123456789abcdef", headers=rival)
    assert refused.status_code == unknown.status_code == 404
    assert refused.json()["detail"].replace(acme_key, "K") == unknown.json()["detail"].replace(
        "0123456789abcdef", "K"
    )


# --- isolation through the API -----------------------------------------------------------------

PARAMETER_VALUES = {
    "context_id": ("answer_1", UNKNOWN_ID),
    "answer_id": ("answer_1", UNKNOWN_ID),
    "trace_id": (TRACE_ID, UNKNOWN_TRACE),
    "request_id": ("req-1", "req-unknown"),
}


def probes(paths: dict[str, dict[str, object]]) -> list[tuple[str, str, str]]:
    """Every GET path of the API with an id in it: (path, with acme's id, with an unknown id)."""
    found = []
    for path, operations in paths.items():
        names = re.findall(r"{(\w+)}", path)
        if "get" not in operations or not names:
            continue
        assert all(name in PARAMETER_VALUES for name in names), f"add a probe value for {path}"
        known = unknown = path
        for name in names:
            known = known.replace(f"{{{name}}}", PARAMETER_VALUES[name][0])
            unknown = unknown.replace(f"{{{name}}}", PARAMETER_VALUES[name][1])
        found.append((path, known, unknown))
    return found


def neutral(text: str) -> str:
    for known, unknown in PARAMETER_VALUES.values():
        text = text.replace(known, "ID").replace(unknown, "ID")
    return re.sub(r'"(generated_at|at|time|elapsed_ms|trace_id)":\s*"?[^,}"]*"?', r'"\1":"T"', text)


@ON_BOTH
async def test_another_tenants_ids_look_exactly_like_unknown_ones(
    tenants: Tenants, http: httpx.AsyncClient, database_url: str, keyed_settings: Settings
) -> None:
    app = create_app(keyed_settings, database_url=database_url)
    checked = probes(app.openapi()["paths"])
    assert len(checked) >= 6, checked  # contexts, lineage, suspicious, impact, traces, verdicts
    acme = bearer(tenants.keys["acme:admin"])
    rival = bearer(tenants.keys["rival:admin"])
    for path, known, unknown in checked:
        mine = await http.get(known, headers=acme)
        assert mine.status_code == 200, (path, mine.text)
        foreign = await http.get(known, headers=rival)
        absent = await http.get(unknown, headers=rival)
        assert foreign.status_code == absent.status_code, path
        assert neutral(foreign.text) == neutral(absent.text), path
        assert "chunk_42" not in foreign.text  # nothing behind the id leaks either


QUERY_PROBES: tuple[tuple[str, dict[str, str]], ...] = (
    ("/v1/log/proof/inclusion", {"tree_size": "1"}),
    ("/v1/impact/page", {}),
    ("/v1/impact/ids", {"format": "json"}),
    ("/v1/contexts/ID/prov", {"format": "json"}),
)


@ON_BOTH
async def test_ids_in_query_parameters_look_like_unknown_ones_too(
    tenants: Tenants, http: httpx.AsyncClient
) -> None:
    rival = bearer(tenants.keys["rival:admin"])
    for path, params in QUERY_PROBES:
        answers = []
        for context_id in ("answer_1", UNKNOWN_ID):
            where = path.replace("ID", context_id)
            given = params if "ID" in path else {**params, "context_id": context_id}
            answers.append(await http.get(where, params=given, headers=rival))
        foreign, absent = answers
        assert foreign.status_code == absent.status_code == 404, (path, foreign.text)
        assert neutral(foreign.text) == neutral(absent.text), path


@ON_BOTH
async def test_searches_and_lists_show_nothing_of_another_tenant(
    tenants: Tenants, http: httpx.AsyncClient
) -> None:
    rival = bearer(tenants.keys["rival:read"])
    listed = await http.get("/v1/contexts", params={"kind": "all"}, headers=rival)
    assert listed.status_code == 200
    assert listed.json()["records"] == []
    for params in (
        {"source_uri": "s3://policies/contractors.md"},
        {"transform_version": "chunker@1.4"},
        {"index_snapshot": "idx_2026_08_01"},
    ):
        foreign = await http.get("/v1/impact", params=params, headers=rival)
        absent = await http.get(
            "/v1/impact", params={k: f"{v}-unknown" for k, v in params.items()}, headers=rival
        )
        assert foreign.status_code == absent.status_code
        assert foreign.json().get("summary") == absent.json().get("summary")
    fresh = await http.get("/v1/freshness", headers=rival)
    assert fresh.status_code == 200
    assert "contractors" not in fresh.text


@ON_BOTH
async def test_a_foreign_parent_is_refused_exactly_like_an_unknown_one(
    tenants: Tenants, http: httpx.AsyncClient, pool: asyncpg.Pool
) -> None:
    rival = bearer(tenants.keys["rival:ingest"])

    def child(parent: str) -> dict[str, object]:
        return {"kind": "summary", "text": "stolen", "parent_ids": [parent], "context_id": "s_1"}

    foreign = await http.post("/v1/contexts", json=child("chunk_42"), headers=rival)
    absent = await http.post("/v1/contexts", json=child(UNKNOWN_ID), headers=rival)
    assert foreign.status_code == absent.status_code == 422
    assert foreign.json()["rule"] == absent.json()["rule"] == "unknown_parent"
    assert foreign.json()["detail"].replace("chunk_42", "ID") == absent.json()["detail"].replace(
        UNKNOWN_ID, "ID"
    )
    async with db.transaction(pool, "rival") as connection:
        assert await connection.fetchval("SELECT count(*) FROM provenance") == 0


# --- isolation in the database -----------------------------------------------------------------


@ON_BOTH
async def test_row_security_holds_when_a_query_forgets_its_tenant_filter(
    tenants: Tenants, pool: asyncpg.Pool, owner: asyncpg.Connection
) -> None:
    assert await owner.fetchval("SELECT count(*) FROM provenance WHERE tenant_id = 'acme'") > 10
    async with db.transaction(pool, "rival") as connection:
        assert await connection.fetchval("SELECT current_user") == "lineage_app"
        for table in TENANT_TABLES:
            tenants_seen = await connection.fetch(f"SELECT DISTINCT tenant_id FROM {table}")
            assert {r["tenant_id"] for r in tenants_seen} <= {"rival"}, table
        # The walks take a tenant argument; they answer only for the set tenant.
        walked = await db.fetch(
            connection, "walk_back", tenant_id="acme", context_id="answer_1", max_depth=20
        )
        below = await db.fetch(
            connection, "blast_radius",
            tenant_id="acme", context_ids=["doc_contractors_v1"], kind="all", max_depth=20,
        )  # fmt: skip
        verdicts = await db.fetch(
            connection, "claim_verdicts", tenant_id="acme", context_ids=["claim_1"]
        )
        assert walked == below == verdicts == []
    async with db.transaction(pool, "rival") as connection:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):  # WITH CHECK
            await connection.execute(
                "INSERT INTO provenance (tenant_id, context_id, kind, content_hash, created_at) "
                "VALUES ('acme', 'planted', 'document', 'sha256:00', now())"
            )
    async with db.transaction(pool, "acme") as connection:
        assert await db.fetch(
            connection, "blast_radius",
            tenant_id="acme", context_ids=["chunk_42"], kind="all", max_depth=20,
        )  # fmt: skip


@ON_BOTH
async def test_a_pooled_connection_never_carries_a_tenant_to_the_next_request(
    tenants: Tenants, database_url: str
) -> None:
    single = await db.create_pool(database_url, min_size=1, max_size=1)
    try:
        async with db.transaction(single, "acme") as connection:
            assert await connection.fetchval("SELECT count(*) FROM provenance") > 0
        async with single.acquire() as connection:
            leftover = await connection.fetchval(
                "SELECT current_setting('lineage.tenant_id', true)"
            )
            assert leftover in ("", None)
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="tenant_id is not set"):
                await connection.fetchval("SELECT count(*) FROM provenance")
    finally:
        await single.close()


WALKS: dict[str, dict[str, Any]] = {
    "walk_back": {"context_id": "answer_1"},
    "suspicious_hops": {"context_id": "answer_1"},
    "blast_radius": {"context_ids": ["chunk_42"], "kind": "all"},
    "blast_radius_ids": {"context_ids": ["chunk_42"], "kind": "all"},
    "blast_radius_by_source": {"source_uri": "s3://policies/contractors.md", "kind": "all"},
    "blast_radius_ids_by_source": {"source_uri": "s3://policies/contractors.md", "kind": "all"},
    "invalidate_by_transform_version": {"transform_version": "chunker@1.4", "kind": "all"},
    "invalidate_by_index_snapshot": {"index_snapshot": "idx_2026_08_01", "kind": "all"},
    "stale_sources": {"source_uri": "any", "kind": "all"},
}


@ON_BOTH
async def test_a_walk_with_no_tenant_set_raises_instead_of_answering_nothing(
    tenants: Tenants, pool: asyncpg.Pool
) -> None:
    """As the application role, a psql recipe that forgot SET LOCAL lineage.tenant_id would
    otherwise answer 0 rows, as if the record had no lineage: row security raises instead."""
    for name, values in WALKS.items():
        async with pool.acquire() as connection:  # the application role, no tenant set
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="tenant_id is not set"):
                await db.fetch(connection, name, tenant_id="acme", max_depth=20, **values)
        async with db.transaction(pool, "acme") as connection:
            assert await db.fetch(connection, name, tenant_id="acme", max_depth=20, **values), name


async def test_key_secrets_are_stored_only_as_hashes(
    tenants: Tenants, owner: asyncpg.Connection, pool: asyncpg.Pool
) -> None:
    stored = await owner.fetch("SELECT key_id, key_hash FROM api_keys")
    secrets_given = {t.split("_", 2)[2] for t in tenants.keys.values()}
    for row in stored:
        assert bytes(row["key_hash"]).hex() not in secrets_given
        assert len(bytes(row["key_hash"])) == 32
    async with db.transaction(pool, "acme") as connection:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await connection.execute("UPDATE api_keys SET scope = 'admin'")


# --- audit -------------------------------------------------------------------------------------


async def test_reads_are_audited_with_the_key_and_only_admins_of_the_tenant_see_them(
    tenants: Tenants, http: httpx.AsyncClient, pool: asyncpg.Pool
) -> None:
    reader = tenants.keys["acme:read"]
    reader_id = reader.split("_")[1]
    assert (await http.get("/v1/contexts/answer_1/lineage", headers=bearer(reader))).is_success
    refused = await http.post("/v1/answers/answer_1/verify", headers=bearer(reader))
    assert refused.status_code == 403  # recording verdicts needs the verify scope
    verifier = tenants.keys["acme:verify"]
    assert (await http.post("/v1/answers/answer_1/verify", headers=bearer(verifier))).is_success
    entries = (await http.get("/v1/audit", headers=bearer(tenants.keys["acme:admin"]))).json()
    mine = [e for e in entries["entries"] if e["key_id"] == reader_id]
    assert [(e["action"], e["target"]) for e in mine][:1] == [("get_lineage", "answer_1")], mine
    verified = [e for e in entries["entries"] if e["key_id"] == verifier.split("_")[1]]
    assert [(e["action"], e["target"]) for e in verified] == [("verify_answer", "answer_1")]
    walked = await http.get(
        "/v1/contexts/answer_1/lineage", params={"max_depth": 3}, headers=bearer(reader)
    )
    assert walked.is_success
    entries = (await http.get("/v1/audit", headers=bearer(tenants.keys["acme:admin"]))).json()
    assert entries["entries"][-2]["detail"] == {"max_depth": "3"}  # a JSON object, not a string
    rival = (await http.get("/v1/audit", headers=bearer(tenants.keys["rival:admin"]))).json()
    assert all(e["key_id"] != reader_id for e in rival["entries"])
    async with db.transaction(pool, "acme") as connection:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await connection.execute("DELETE FROM audit_log")


# --- limits ------------------------------------------------------------------------------------


async def count_rows(pool: asyncpg.Pool, tenant: str) -> int:
    async with db.transaction(pool, tenant) as connection:
        count: int = await connection.fetchval("SELECT count(*) FROM provenance")
    return count


async def test_every_limit_answers_4xx_with_a_message_and_writes_nothing(
    tenants: Tenants, http: httpx.AsyncClient, pool: asyncpg.Pool
) -> None:
    key = bearer(tenants.keys["acme:ingest"])
    before = await count_rows(pool, "acme")
    base = {"kind": "summary", "text": "s", "parent_ids": ["chunk_42"]}
    cases: dict[str, tuple[dict[str, object], str]] = {
        "too many parents": ({**base, "parent_ids": ["chunk_42"] * (MAX_PARENTS + 1)}, "parents"),
        "attributes": ({**base, "attributes": {"x": "y" * MAX_ATTRIBUTES_BYTES}}, "attributes"),
        "id format": ({**base, "context_id": "bad id!"}, "context_id"),
    }
    for name, (body, word) in cases.items():
        response = await http.post("/v1/contexts", json=body, headers=key)
        assert response.status_code == 422, name
        assert word in response.json()["detail"], (name, response.json())
    batch = {"records": [{**base, "context_id": "fine_1"}, {**base, "context_id": "bad id!"}]}
    assert (await http.post("/v1/contexts/batch", json=batch, headers=key)).status_code == 422
    huge = json.dumps({**base, "attributes": {"x": "y" * 9_000_000}})
    too_big = await http.post(
        "/v1/contexts", content=huge, headers={**key, "Content-Type": "application/json"}
    )
    assert too_big.status_code == 413
    assert "split" in too_big.json()["detail"]
    assert await count_rows(pool, "acme") == before  # nothing written, nothing half-written


async def test_too_many_bad_requests_from_one_key_get_429_and_others_are_unaffected(
    tenants: Tenants, database_url: str
) -> None:
    settings = Settings(auth="keys", bad_request_limit=3, bad_request_window_s=60)
    app = create_app(settings, database_url=database_url)
    noisy = bearer(tenants.keys["acme:ingest"])
    quiet = bearer(tenants.keys["acme:read"])
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as client:
            for _ in range(3):
                bad = await client.post("/v1/contexts", json={"kind": "nope"}, headers=noisy)
                assert bad.status_code == 422
            capped = await client.post("/v1/contexts", json={"kind": "nope"}, headers=noisy)
            assert capped.status_code == 429
            assert int(capped.headers["retry-after"]) >= 1
            assert "bad requests" in capped.json()["detail"]
            good = {"kind": "document", "text": "t", "source_uri": "s3://x.md"}
            assert (await client.post("/v1/contexts", json=good, headers=noisy)).status_code == 429
            fine = await client.get("/v1/contexts/answer_1", headers=quiet)
            assert fine.status_code == 200


# --- the command line --------------------------------------------------------------------------


def run_cli(database_url: str, *args: str) -> str:
    result = CliRunner().invoke(cli.app, list(args), env={"LINEAGE_DATABASE_URL": database_url})
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


async def test_cli_creates_tenants_and_keys_that_the_service_accepts(
    database_url: str, keyed_settings: Settings, http: httpx.AsyncClient
) -> None:
    import asyncio

    call: Callable[..., str] = run_cli
    out = await asyncio.to_thread(call, database_url, "tenant", "create", "globex")
    assert "created" in out
    out = await asyncio.to_thread(
        call, database_url, "key", "create", "--tenant", "globex", "--scope", "ingest"
    )
    token = out.strip().splitlines()[-1]
    assert auth.KEY_PATTERN.match(token), out
    record = {"kind": "document", "text": "globex doc", "source_uri": "s3://g.md"}
    made = await http.post("/v1/contexts", json=record, headers=bearer(token))
    assert made.status_code == 201
    listed = await asyncio.to_thread(call, database_url, "key", "list", "--tenant", "globex")
    key_id = token.split("_")[1]
    assert key_id in listed
    assert token.split("_", 2)[2] not in listed
    await asyncio.to_thread(call, database_url, "key", "revoke", key_id, "--tenant", "globex")
    assert (await http.post("/v1/contexts", json=record, headers=bearer(token))).status_code == 401
