"""What a request costs the database beside its work: a key the server has verified is not
looked up again, yet a key revoked anywhere is refused on the very next request; an audited
request writes its audit row in the transaction of its work."""

import json
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from lineage import db
from lineage.api import models
from lineage.api.app import create_app
from lineage.db.database import Database
from lineage.services import auth
from lineage.services.key_cache import CHANNEL
from lineage.settings import Settings

TENANT = "acme"
UNKNOWN = "/v1/contexts/ctx_00000000000000000000000000000000"  # 404 once the key is accepted


@pytest.fixture
async def http(database_url: str, owner_database: Database) -> AsyncIterator[httpx.AsyncClient]:
    assert await auth.create_tenant(owner_database, TENANT)
    app = create_app(Settings(auth="keys", bad_request_limit=1000), database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as client:
            yield client


async def status(http: httpx.AsyncClient, token: str, path: str = UNKNOWN) -> int:
    response = await http.get(path, headers={"Authorization": f"Bearer {token}"})
    return response.status_code


async def test_a_verified_key_is_not_looked_up_again(
    http: httpx.AsyncClient, database: Database, owner: asyncpg.Connection
) -> None:
    if not await owner.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", db.APP_ROLE):
        pytest.skip(f"no {db.APP_ROLE} on this server")
    token, _ = await auth.create_key(database, TENANT, "read")
    assert await status(http, token) == 404
    # Every lookup fails from now on: only a key the server kept is still accepted.
    await owner.execute(f"REVOKE EXECUTE ON FUNCTION lineage_key(text) FROM {db.APP_ROLE}")
    try:
        assert await status(http, token) == 404
    finally:
        await owner.execute(f"GRANT EXECUTE ON FUNCTION lineage_key(text) TO {db.APP_ROLE}")


async def test_a_key_revoked_elsewhere_is_refused_on_the_next_request(
    http: httpx.AsyncClient, database: Database
) -> None:
    for _ in range(20):
        token, row = await auth.create_key(database, TENANT, "read")
        assert await status(http, token) == 404
        assert await status(http, token) == 404  # the server holds it now
        # Another pool, as `lineage key revoke` in another process; the very next request:
        await auth.revoke_key(database, TENANT, row["key_id"])
        assert await status(http, token) == 401


async def held_key(http: httpx.AsyncClient, database: Database) -> tuple[str, str]:
    """A new key's token and id, accepted twice, so the server holds it."""
    token, row = await auth.create_key(database, TENANT, "read")
    assert [await status(http, token), await status(http, token)] == [404, 404]
    return token, row["key_id"]


async def test_a_key_revoked_by_the_function_itself_is_refused_on_the_next_request(
    http: httpx.AsyncClient, database: Database
) -> None:
    token, key_id = await held_key(http, database)
    # As docs/tenants.md's psql as lineage_app, not through sql/key_revoke.sql:
    async with database.tenant(TENANT) as tx:
        await tx.connection.execute("SELECT lineage_key_revoke($1)", key_id)
    assert await status(http, token) == 401


async def test_a_key_of_a_tenant_deleted_by_the_function_itself_is_refused_on_the_next_request(
    http: httpx.AsyncClient, database: Database, owner: asyncpg.Connection
) -> None:
    token, _ = await held_key(http, database)
    await owner.execute("SELECT lineage_delete_tenant($1)", TENANT)  # not sql/tenant_delete.sql
    assert await status(http, token) == 401


async def test_while_the_key_listener_is_down_every_key_is_looked_up(
    http: httpx.AsyncClient, database: Database, owner: asyncpg.Connection
) -> None:
    token, row = await auth.create_key(database, TENANT, "read")
    assert await status(http, token) == 404
    assert await owner.fetchval(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name = $1 AND datname = current_database()",
        CHANNEL,
    )
    # The revocation's notification reaches no listener; the cache must not be trusted.
    await auth.revoke_key(database, TENANT, row["key_id"])
    assert await status(http, token) == 401
    other, _ = await auth.create_key(database, TENANT, "read")
    assert await status(http, other) == 404  # and keys still work while it listens again


async def test_an_audited_request_writes_its_audit_row_with_its_work(
    http: httpx.AsyncClient, database: Database
) -> None:
    admin, _ = await auth.create_key(database, TENANT, "admin")
    made = await http.post(
        "/v1/keys", json={"scope": "read"}, headers={"Authorization": f"Bearer {admin}"}
    )
    assert made.status_code == 201
    assert await status(http, admin, "/v1/contexts/ctx_00000000000000000000000000000001") == 404
    async with database.tenant(TENANT) as tx:
        key_xmin = await tx.connection.fetchval(
            "SELECT xmin::text FROM api_keys WHERE key_id = $1", made.json()["key_id"]
        )
        audited = await tx.connection.fetch(
            "SELECT action, target, xmin::text AS xmin FROM audit_log ORDER BY at"
        )
    assert [(row["action"], row["target"]) for row in audited] == [
        ("create_key", None),
        ("get_context", "ctx_00000000000000000000000000000001"),  # once, though the read failed
    ]
    assert audited[0]["xmin"] == key_xmin  # one transaction: the key and who made it


async def test_a_walk_back_is_sent_as_its_model_documents_it(
    http: httpx.AsyncClient, database: Database
) -> None:
    token, _ = await auth.create_key(database, TENANT, "admin")
    headers = {"Authorization": f"Bearer {token}"}
    document = {"kind": "document", "text": "policy", "source_uri": "s3://policy.md"}
    made = (await http.post("/v1/contexts", json=document, headers=headers)).json()
    chunk = {"kind": "chunk", "text": "clause", "parent_ids": [made["context_id"]]}
    child = (await http.post("/v1/contexts", json=chunk, headers=headers)).json()
    walked = await http.get(f"/v1/contexts/{child['context_id']}/lineage", headers=headers)
    assert walked.status_code == 200
    body = walked.json()
    checked = models.WalkBack.model_validate(body)
    assert json.loads(checked.model_dump_json()) == body
    assert [node["context_id"] for node in body["nodes"]] == [
        child["context_id"],
        made["context_id"],
    ]


@pytest.mark.parametrize("verify", [False, True])
async def test_a_record_is_sent_as_its_model_documents_it(
    http: httpx.AsyncClient, database: Database, verify: bool
) -> None:
    token, _ = await auth.create_key(database, TENANT, "admin")
    headers = {"Authorization": f"Bearer {token}"}
    document = {"kind": "document", "text": "policy", "source_uri": "s3://policy.md"}
    made = (await http.post("/v1/contexts", json=document, headers=headers)).json()
    read = await http.get(
        f"/v1/contexts/{made['context_id']}", params={"verify": verify}, headers=headers
    )
    assert read.status_code == 200
    body = read.json()
    checked = models.CheckedRecord.model_validate(body)
    assert json.loads(checked.model_dump_json(exclude_unset=True)) == body
    assert ("signature" in body) == verify


async def test_a_page_of_records_is_sent_as_its_model_documents_it(
    http: httpx.AsyncClient, database: Database
) -> None:
    token, _ = await auth.create_key(database, TENANT, "admin")
    headers = {"Authorization": f"Bearer {token}"}
    made = []
    for number in range(3):
        document = {"kind": "document", "text": f"policy {number}", "source_uri": "s3://p.md"}
        made.append((await http.post("/v1/contexts", json=document, headers=headers)).json())
    listed, cursor = [], None
    while True:
        params: dict[str, str | int] = {"kind": "document", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = await http.get("/v1/contexts", params=params, headers=headers)
        assert page.status_code == 200
        body = page.json()
        checked = models.RecordPage.model_validate(body)
        assert json.loads(checked.model_dump_json(exclude_unset=True)) == body
        listed += [record["context_id"] for record in body["records"]]
        if (cursor := body["next"]) is None:
            break
    assert listed == [record["context_id"] for record in made]
