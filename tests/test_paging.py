"""One way to page: every listing takes `cursor` and `limit` and answers `next`, an opaque
cursor, until null; following it sees every item once."""

import json
import re
import shlex
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import asyncpg
import httpx
import psycopg
import pytest
from typer.testing import CliRunner

from lineage.api.app import create_app
from lineage.cli import app
from lineage.core.derive import derive
from lineage.db.migrate import migrate
from lineage.settings import Settings
from lineage.store import PostgresStore
from lineage.verifiable_log.checkpoint import Checkpoint
from tests.conftest import database_at, sync_connect, url_for
from tests.test_log import documents

PAGE = 3


async def follow(
    client: httpx.AsyncClient, path: str, items: Callable[[dict[str, Any]], list[Any]], **query: Any
) -> list[list[Any]]:
    """Every page of a listing, following `next` from the first page until it is null."""
    pages: list[list[Any]] = []
    cursor = None
    while True:
        params = {**query, "limit": PAGE} | ({"cursor": cursor} if cursor else {})
        answer = await client.get(path, params=params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        pages.append(items(body))
        cursor = body["next"]
        if cursor is None:
            return pages
        assert isinstance(cursor, str) and len(pages) < 20, body


def once(pages: list[list[Any]]) -> list[Any]:
    seen = [item for page in pages for item in page]
    assert len(seen) == len(set(seen)), pages
    return seen


async def test_contexts_page_with_next(client: httpx.AsyncClient, store: PostgresStore) -> None:
    await store.append(documents(7))
    pages = await follow(client, "/v1/contexts", lambda b: [r["context_id"] for r in b["records"]])
    assert len(pages) >= 3
    assert sorted(once(pages)) == sorted(f"doc_{i}" for i in range(7))


async def test_the_audit_pages_with_next(
    client: httpx.AsyncClient, owner: asyncpg.Connection
) -> None:
    for _ in range(7):
        assert (await client.get("/v1/keys")).status_code == 200  # each read is audited
    before = {row["audit_id"] for row in await owner.fetch("SELECT audit_id FROM audit_log")}
    assert len(before) >= 7
    pages = await follow(client, "/v1/audit", lambda b: [e["audit_id"] for e in b["entries"]])
    assert len(pages) >= 3
    assert before <= set(once(pages))  # and the audit rows of the paging itself, once each


async def test_a_blast_radius_pages_with_next_and_still_takes_an_offset(
    client: httpx.AsyncClient, store: PostgresStore
) -> None:
    policy = await derive(store, [], "policy", "document", source_uri="s3://policy.md")
    answers = [await derive(store, [policy], f"answer {i}", "answer") for i in range(7)]
    query = {"source_uri": "s3://policy.md", "kind": "answer"}
    pages = await follow(
        client, "/v1/impact/page", lambda b: [n["context_id"] for n in b["nodes"]], **query
    )
    assert [len(page) for page in pages] == [3, 3, 1]
    assert sorted(once(pages)) == sorted(a.context_id for a in answers)
    # The explorer pages by offset: it still works, and agrees with the cursor.
    second = (await client.get("/v1/impact/page", params={**query, "limit": 3, "offset": 3})).json()
    assert [n["context_id"] for n in second["nodes"]] == pages[1]
    assert second["next_offset"] == 6 and second["offset"] == 3
    first = (await client.get("/v1/impact/page", params={**query, "limit": 3})).json()
    by_cursor = await client.get("/v1/impact/page", params={**query, "cursor": first["next"]})
    assert by_cursor.json()["offset"] == 3
    both = {**query, "offset": 3, "cursor": first["next"]}
    assert (await client.get("/v1/impact/page", params=both)).status_code == 422


@pytest.fixture
def icu_database_url(template_db: tuple[str, str]) -> Iterator[str]:
    """A migrated database on the tests' server whose collation is ICU's English: "answer_a"
    sorts before "answer_B" there, after it in code point order."""
    base, _ = template_db
    name = f"lineage_icu_{uuid.uuid4().hex[:12]}"
    with sync_connect(base) as server:
        try:
            server.execute(
                f"CREATE DATABASE {name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en' "
                "LOCALE 'C.UTF-8'"
            )
        except psycopg.errors.FeatureNotSupported:  # the embedded server, built without ICU
            pytest.skip("this server has no ICU, so no linguistic collation to sort by")
    try:
        migrate(url_for(base, name))
        yield url_for(base, name)
    finally:
        with sync_connect(base) as server:
            server.execute(f"DROP DATABASE {name} WITH (FORCE)")


async def test_a_blast_radius_pages_alike_under_a_linguistic_collation(
    icu_database_url: str, settings: Settings
) -> None:
    """The paged radius finds its cursor's place comparing ids in Python: the walks list ids in
    code point order whatever the database's collation, or pages skip records."""
    ids = ["answer_B", "answer_D", "answer_a", "answer_c"]  # in code point order
    async with database_at(icu_database_url, settings) as database:
        store = PostgresStore(database)
        policy = await derive(store, [], "policy", "document", source_uri="s3://policy.md")
        for context_id in reversed(ids):
            await derive(store, [policy], context_id, "answer", context_id=context_id)
    app = create_app(settings, database_url=icu_database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as client:
            query = {"source_uri": "s3://policy.md", "kind": "answer"}
            pages = await follow(
                client, "/v1/impact/page", lambda b: [n["context_id"] for n in b["nodes"]], **query
            )
            assert once(pages) == ids
            listed = await client.get("/v1/impact/ids", params=query)
            assert [line.split(",")[0] for line in listed.text.splitlines()[1:]] == ids


async def test_checkpoints_page_with_next_and_still_take_after(
    client: httpx.AsyncClient, store: PostgresStore
) -> None:
    for round_ in range(5):
        await store.append(documents(1, tag=f"r{round_}"))
        assert (await client.get("/v1/log/checkpoint")).status_code == 200
    pages = await follow(client, "/v1/log/checkpoints", lambda b: b["checkpoints"])
    sizes = [Checkpoint.from_note(note).tree_size for note in once(pages)]
    assert sizes == [1, 2, 3, 4, 5] and len(pages) >= 2
    # What `lineage log monitor --url` sends: checkpoints larger than a tree size.
    after = (await client.get("/v1/log/checkpoints", params={"after": 3})).json()
    assert [Checkpoint.from_note(note).tree_size for note in after["checkpoints"]] == [4, 5]


async def test_a_cursor_this_api_did_not_hand_out_is_refused(client: httpx.AsyncClient) -> None:
    for path in ("/v1/contexts", "/v1/audit", "/v1/log/checkpoints"):
        answer = await client.get(path, params={"cursor": "not-a-cursor"})
        assert answer.status_code == 422, (path, answer.text)
        assert answer.json()["rule"] == "bad_parameter", path
    answer = await client.get(
        "/v1/impact/page", params={"source_uri": "s3://x", "cursor": "bm90IGpzb24"}
    )
    assert answer.status_code == 422


def test_audit_list_names_the_command_for_the_next_page(database_url: str) -> None:
    env = {"LINEAGE_DATABASE_URL": database_url, "COLUMNS": "200"}
    for on in ("--capture-query-text", "--no-capture-query-text", "--capture-query-text"):
        assert (
            CliRunner().invoke(app, ["tenant", "settings", "default", on], env=env).exit_code == 0
        )
    seen: list[int] = []
    command = ["audit", "list", "--tenant", "default", "--limit", "2"]
    while True:
        done = CliRunner().invoke(app, command, env=env)
        assert done.exit_code == 0, done.output
        seen += [json.loads(line)["audit_id"] for line in done.stdout.splitlines()]
        more = re.search(r"more: lineage (.+)", done.stderr)
        if more is None:
            break
        command = shlex.split(more[1])
    assert len(seen) == len(set(seen)) == 3
