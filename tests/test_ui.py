"""The explorer: its files ship inside the package, session cookies, blast radii a page at a time
and as files of ids, the claim-verdict marks of sql/suspicious_hops.sql, and the page itself,
driven in a real Chromium against `lineage serve` with the demo incident loaded."""

import asyncio
import csv
import fnmatch
import io
import json
import re
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from playwright.async_api import Locator, Page, async_playwright, expect
from pydantic import SecretStr

from lineage.api.app import create_app
from lineage.api.session import SESSION_COOKIE, issue_session, read_session
from lineage.core.derive import Derivation, derive, derive_many
from lineage.db.database import Database
from lineage.services import auth, walks
from lineage.services.auth import Caller
from lineage.services.demo import (
    ANSWER_ID,
    CONTRACTOR_POLICY,
    TRACE_ID,
    load_incident,
    verify_incident,
)
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.browser import lineage_serve

# Starts servers or browsers of its own: outside the fast tier.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
UI_FILES = (
    "index.html", "style.css", "app.js", "dom.js", "graph.js", "live.js", "radius.js", "record.js",
    "trace.js", "walk.js", "vendor/dagre.min.js", "vendor/dagre.LICENSE.txt",
)  # fmt: skip
# The six reasons sql/suspicious_hops.sql can give, each with a legend entry on the page.
REASONS = (
    "old_transform_version",
    "snapshot_predates_revision",
    "source_changed",
    "hallucinated_id",
    "unsupported",
    "cross_source_merge",
)


@asynccontextmanager
async def serve(settings: Settings, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as http:
            yield http


# --- the page ships inside the package ----------------------------------------------------------


def test_the_page_ships_inside_the_package_and_loads_nothing_from_elsewhere() -> None:
    shipped = files("lineage.ui")
    for name in UI_FILES:
        assert shipped.joinpath(name).is_file(), f"lineage/ui/{name} is not a package resource"
    # What a plain `pip install` copies besides the modules: setuptools' package-data.
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["lineage"]
    for name in UI_FILES:
        assert any(fnmatch.fnmatch(f"ui/{name}", pattern) for pattern in package_data), (
            f"pyproject.toml package-data does not ship ui/{name}"
        )
    for name in UI_FILES:
        urls = set(re.findall(r"(?:https?:)?//[\w.-]+\.\w+/[^\s\"'`)]*", shipped.joinpath(name)
                              .read_text()))  # fmt: skip
        assert urls <= {"http://www.w3.org/2000/svg"}, f"{name} reaches outside: {urls}"


async def test_the_page_is_served_to_anyone_and_the_api_still_wants_a_key(
    database_url: str, settings: Settings
) -> None:
    async with serve(settings.model_copy(update={"auth": "keys"}), database_url) as http:
        page = await http.get("/ui")
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert "default-src 'self'" in page.headers["content-security-policy"]
        for name in ("style.css", "app.js", "vendor/dagre.min.js"):
            assert f'"ui/{name}"' in page.text, name
        for name in UI_FILES:
            served = await http.get(f"/ui/{name}")
            assert served.status_code == 200, name
            assert served.content == files("lineage.ui").joinpath(name).read_bytes()
        assert (await http.get("/ui/app.js")).headers["content-type"].startswith("text/javascript")
        for missing in (
            "/ui/nothing.js",
            "/ui/__init__.py",
            "/ui/..%2Fsession.py",
            "/ui/vendor/README.md",
            "/ui/vendor/..%2Fapp.js",
        ):
            assert (await http.get(missing)).status_code == 404, missing
        assert (await http.get(f"/v1/contexts/{ANSWER_ID}")).status_code == 401


# --- session tokens -----------------------------------------------------------------------------


def test_session_tokens_name_their_caller_until_they_expire() -> None:
    settings = Settings(session_secret=SecretStr("s" * 32), session_ttl_seconds=3600)
    caller = Caller("acme", "0123456789abcdef", "read")
    token = issue_session(caller, settings, now=1_000_000)
    assert read_session(token, settings, now=1_000_000) == caller
    assert read_session(token, settings, now=1_000_000 + 3599) == caller
    assert read_session(token, settings, now=1_000_000 + 3600) is None

    payload, _, signature = token.partition(".")
    other = Settings(session_secret=SecretStr("t" * 32))
    forged_payload = payload[:-2] + ("AA" if payload[-2:] != "AA" else "BB")
    for bad in (
        "",
        ".",
        "no-dot",
        f"{payload}.",
        f"{payload}.{signature[:-1]}",
        f"{forged_payload}.{signature}",
        f"{payload}.{signature}x",
        f"{payload}.{signature.upper()}",
        "é.é",
    ):
        assert read_session(bad, settings, now=1_000_000) is None, bad
    assert read_session(token, other, now=1_000_000) is None
    # Unset, the secret is random per process: a configured one does not open its tokens.
    unset = Settings()
    assert read_session(issue_session(caller, unset), unset) == caller
    assert read_session(issue_session(caller, unset), settings) is None


def session_header(http: httpx.AsyncClient, response: httpx.Response) -> dict[str, str]:
    """The session cookie a response set, as a header: only requests given it carry it."""
    http.cookies.clear()
    found = re.match(rf"{SESSION_COOKIE}=([^;]+)", response.headers["set-cookie"])
    assert found, response.headers["set-cookie"]
    return {"Cookie": f"{SESSION_COOKIE}={found.group(1)}"}


@pytest.fixture
async def demo(store: PostgresStore) -> PostgresStore:
    await load_incident(store)
    return store


async def test_a_key_becomes_a_read_only_session_cookie(
    demo: PostgresStore, database_url: str, settings: Settings, database: Database,
    owner: asyncpg.Connection,
) -> None:  # fmt: skip
    read_key, _ = await auth.create_key(database, "default", "read")
    admin_key, _ = await auth.create_key(database, "default", "admin")
    ingest_key, _ = await auth.create_key(database, "default", "ingest")
    await owner.execute("INSERT INTO tenants (tenant_id) VALUES ('other')")
    other_key, _ = await auth.create_key(database, "other", "read")
    async with serve(settings.model_copy(update={"auth": "keys"}), database_url) as http:
        for refused in ("lk_0000000000000000_" + "x" * 43, "not a key"):
            response = await http.post("/v1/session", json={"key": refused})
            assert response.status_code == 401, response.text
            assert "set-cookie" not in response.headers
            assert response.headers["www-authenticate"].startswith("Bearer")
        response = await http.post("/v1/session", json={"key": ingest_key})
        assert response.status_code == 403
        assert "set-cookie" not in response.headers
        assert (await http.post("/v1/session", json={})).status_code == 422

        for key in (read_key, admin_key):
            response = await http.post("/v1/session", json={"key": key})
            assert response.status_code == 200, response.text
            assert response.json() == {"tenant_id": "default", "scope": "read", "expires_in": 3600}
            cookie = response.headers["set-cookie"]
            assert cookie.startswith(f"{SESSION_COOKIE}=")
            for attribute in ("HttpOnly", "Max-Age=3600", "Path=/", "SameSite=strict"):
                assert attribute in cookie, (attribute, cookie)
            assert "Secure" not in cookie  # plain http: a browser would drop a Secure cookie
            session = session_header(http, response)
            # The cookie stands in for the key on reads and on a download link...
            read = await http.get(f"/v1/contexts/{ANSWER_ID}", headers=session)
            assert read.status_code == 200
            ids = await http.get(
                "/v1/impact/ids", params={"source_uri": CONTRACTOR_POLICY}, headers=session
            )
            assert ids.status_code == 200 and "chunk_42" in ids.text
            # ...but never writes, even for an admin key.
            write = await http.post(
                "/v1/contexts",
                json={"kind": "document", "source_uri": "s3://x", "text": "x"},
                headers=session,
            )
            assert write.status_code == 403
        assert (await http.get(f"/v1/contexts/{ANSWER_ID}")).status_code == 401

        response = await http.post("/v1/session", json={"key": other_key})
        assert response.json()["tenant_id"] == "other"
        session = session_header(http, response)
        assert (await http.get(f"/v1/contexts/{ANSWER_ID}", headers=session)).status_code == 404

        # Revoking the key ends its sessions at once, not when they expire.
        response = await http.post("/v1/session", json={"key": read_key})
        session = session_header(http, response)
        assert (await http.get(f"/v1/contexts/{ANSWER_ID}", headers=session)).status_code == 200
        await auth.revoke_key(database, "default", read_key.split("_")[1])
        revoked = await http.get(f"/v1/contexts/{ANSWER_ID}", headers=session)
        assert revoked.status_code == 401, revoked.text

        signed_out = await http.delete("/v1/session")
        assert signed_out.status_code == 204
        assert re.search(rf'{SESSION_COOKIE}=(""|);.*Max-Age=0', signed_out.headers["set-cookie"])


async def test_with_auth_off_any_key_opens_a_session(
    demo: PostgresStore, client: httpx.AsyncClient
) -> None:
    response = await client.post("/v1/session", json={"key": "anything"})
    assert response.status_code == 200
    assert response.json()["tenant_id"] == "default"


# --- blast radius by page and as files ----------------------------------------------------------

FAN_CHUNKS = 30
FAN_ANSWERS = 250


async def load_fan(store: PostgresStore) -> None:
    """s3://fan.md <- 30 chunks <- 250 answers, each from one chunk."""
    items = [Derivation([], "fan", "document", source_uri="s3://fan.md", context_id="fan_doc")]
    items += [
        Derivation(["fan_doc"], f"chunk {i}", "chunk", context_id=f"fan_chunk_{i}")
        for i in range(FAN_CHUNKS)
    ]
    items += [
        Derivation([f"fan_chunk_{i % FAN_CHUNKS}"], f"answer {i}", "answer", context_id=f"fan_{i}")
        for i in range(FAN_ANSWERS)
    ]
    await derive_many(store, items)


async def test_a_large_radius_comes_a_page_at_a_time(
    store: PostgresStore, client: httpx.AsyncClient
) -> None:
    await load_fan(store)
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        response = await client.get(
            "/v1/impact/page", params={"source_uri": "s3://fan.md", "offset": offset}
        )
        assert response.status_code == 200, response.text
        page = response.json()
        assert page["summary"] == {
            "total": 1 + FAN_CHUNKS + FAN_ANSWERS,
            "counts_by_kind": {"answer": FAN_ANSWERS, "chunk": FAN_CHUNKS, "document": 1},
            "truncated": False,
            "truncated_reason": None,
        }
        assert page["matching"] == FAN_ANSWERS and page["kind"] == "answer"
        assert len(page["nodes"]) == min(100, FAN_ANSWERS - offset)
        assert {node["kind"] for node in page["nodes"]} == {"answer"}
        seen += [node["context_id"] for node in page["nodes"]]
        offset = page["next_offset"]
    assert len(seen) == len(set(seen)) == FAN_ANSWERS
    assert set(seen) == {f"fan_{i}" for i in range(FAN_ANSWERS)}

    one = await client.get(
        "/v1/impact/page", params={"context_id": "fan_chunk_0", "kind": "any", "limit": 5}
    )
    body = one.json()
    below = 1 + len(range(0, FAN_ANSWERS, FAN_CHUNKS))  # the chunk and its answers
    assert body["matching"] == body["summary"]["total"] == below
    assert body["nodes"][0]["context_id"] == "fan_chunk_0"
    assert body["next_offset"] == 5

    bad: tuple[tuple[dict[str, str | int], int, str], ...] = (
        ({}, 422, "exactly one of source_uri, context_id"),
        ({"source_uri": "s3://fan.md", "context_id": "fan_doc"}, 422, "exactly one"),
        ({"source_uri": "s3://nothing.md"}, 404, "no records with source_uri s3://nothing.md"),
        ({"context_id": "nothing_1"}, 404, "nothing_1"),
        ({"source_uri": "s3://fan.md", "kind": "bogus"}, 422, "'bogus' is not a kind"),
        ({"source_uri": "s3://fan.md", "limit": 0}, 422, "limit"),
        ({"source_uri": "s3://fan.md", "max_depth": 101}, 422, "max_depth"),
    )
    for params, status, detail in bad:
        for path in ("/v1/impact/page", "/v1/impact/ids"):
            if path.endswith("ids") and "limit" in params:
                continue
            response = await client.get(path, params=params)
            assert response.status_code == status, (path, params, response.text)
            assert detail in response.json()["detail"], (path, params, response.text)


async def test_the_ids_of_a_radius_download_as_csv_and_json(
    store: PostgresStore, client: httpx.AsyncClient
) -> None:
    await load_fan(store)
    everything = (await client.get("/v1/impact", params={"source_uri": "s3://fan.md"})).json()
    expected = {node["context_id"]: node["kind"] for node in everything["nodes"]}
    answers = {i for i, kind in expected.items() if kind == "answer"}

    response = await client.get("/v1/impact/ids", params={"source_uri": "s3://fan.md"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    assert response.headers["content-disposition"] == (
        'attachment; filename="impact-any-s3_fan.md.csv"'
    )
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert list(rows[0]) == ["context_id", "kind", "depth", "truncated"]
    assert {row["context_id"]: row["kind"] for row in rows} == expected
    assert len(rows) == len(expected)
    # The server writes the CSV (COPY): the same rows, order and spelling as the JSON file's.
    listed = (
        await client.get("/v1/impact/ids", params={"source_uri": "s3://fan.md", "format": "json"})
    ).json()["records"]
    assert response.text.split("\r\n") == [
        "context_id,kind,depth,truncated",
        *(f"{r['context_id']},{r['kind']},{r['depth']},{r['truncated']}" for r in listed),
        "",
    ]
    shallow = await client.get(
        "/v1/impact/ids", params={"source_uri": "s3://fan.md", "max_depth": 1}
    )
    assert {row["truncated"] for row in csv.DictReader(io.StringIO(shallow.text))} == {"True"}

    response = await client.get(
        "/v1/impact/ids", params={"source_uri": "s3://fan.md", "kind": "answer", "format": "json"}
    )
    assert response.headers["content-disposition"].endswith('answer-s3_fan.md.json"')
    document = response.json()
    assert document["start"] == {"source_uri": "s3://fan.md"} and document["kind"] == "answer"
    assert {record["context_id"] for record in document["records"]} == answers
    assert document["summary"]["counts_by_kind"] == {"answer": FAN_ANSWERS}

    response = await client.get(
        "/v1/impact/ids", params={"context_id": "fan_chunk_1", "format": "json"}
    )
    records = response.json()["records"]
    assert (records[0]["context_id"], records[0]["depth"]) == ("fan_chunk_1", 0)
    assert {r["context_id"] for r in records[1:]} == {
        f"fan_{i}" for i in range(1, FAN_ANSWERS, FAN_CHUNKS)
    }
    assert (await client.get("/v1/impact/ids?source_uri=x&format=xml")).status_code == 422


# --- claim verdicts are marked by sql/suspicious_hops.sql ---------------------------------------


async def judge(store: PostgresStore, judge_name: str, verdict: str) -> None:
    """A claim verdict on claim_1, as lineage.claims.verify appends them."""
    attributes = {"check": "claim", "verdict": verdict, "judge": judge_name,
                  "judge_version": "1", "reason": f"{judge_name} says {verdict}"}  # fmt: skip
    await derive(
        store, ["claim_1"], json.dumps(attributes), "verdict", "verify_claims", "1",
        attributes=attributes,
    )  # fmt: skip


async def marks(database: Database, settings: Settings, start: str) -> dict[tuple[str, str], Any]:
    hops = await walks.suspicious_hops(database, settings, "default", start, None)
    return {(hop["context_id"], hop["reason"]): (hop["depth"], hop["detail"]) for hop in hops}


async def test_failing_claim_verdicts_are_marked_by_the_query(
    demo: PostgresStore, database: Database, settings: Settings
) -> None:
    stale = {
        ("chunk_42", "old_transform_version"),
        ("chunk_42", "snapshot_predates_revision"),
        ("doc_contractors_v1", "source_changed"),
    }
    assert set(await marks(database, settings, ANSWER_ID)) == stale

    await judge(demo, "nli", "unsupported")
    await judge(demo, "rules", "uncited")  # failing, but not a mark the explorer draws
    found = await marks(database, settings, ANSWER_ID)
    assert set(found) == stale | {("claim_1", "unsupported")}
    assert found["claim_1", "unsupported"] == (1, "judge nli found it unsupported: nli says "
                                               "unsupported")  # fmt: skip
    assert (await marks(database, settings, "claim_1"))["claim_1", "unsupported"][0] == 0

    await judge(demo, "rules", "hallucinated_id")  # now the current verdict of "rules"
    await judge(demo, "nli", "supported")  # and "nli" changed its mind
    assert set(await marks(database, settings, ANSWER_ID)) == stale | {
        ("claim_1", "hallucinated_id")
    }

    await judge(demo, "llm", "hallucinated_id")  # two judges agree: one mark naming both
    found = await marks(database, settings, ANSWER_ID)
    assert found["claim_1", "hallucinated_id"][1] == (
        "judge llm found it hallucinated_id: llm says hallucinated_id; "
        "judge rules found it hallucinated_id: rules says hallucinated_id"
    )


# --- in a real browser --------------------------------------------------------------------------


def node(page: Page, context_id: str) -> Locator:
    return page.locator(f"#graph .node[data-id='{context_id}']")


def field(page: Page, name: str) -> Locator:
    return page.locator(f"#record dd[data-field='{name}']")


MARKED = re.compile(r"\bmarked\b")


async def sign_in(page: Page, key: str) -> None:
    """Keys are on: the page's first read answers 401 and the page asks for a key."""
    dialog = page.locator("#key-dialog")
    await expect(dialog).to_be_visible()
    await page.fill("#key", "lk_0000000000000000_" + "x" * 43)
    await page.click("#key-form button")
    await expect(page.locator("#key-error")).to_contain_text("unknown or revoked")
    await page.fill("#key", key)
    await page.click("#key-form button")
    await expect(dialog).to_be_hidden()
    [cookie] = [c for c in await page.context.cookies() if c["name"] == SESSION_COOKIE]
    assert cookie.get("httpOnly") and cookie.get("sameSite") == "Strict", cookie


async def search(page: Page, text: str) -> None:
    await page.fill("#query", text)
    await page.press("#query", "Enter")


async def check_walk_back(page: Page, walk: dict[str, Any]) -> None:
    """Every node drawn, by depth, the stale chunk and the changed source marked."""
    await expect(page.locator("#graph svg")).to_be_visible()
    for context_id in {n["context_id"] for n in walk["nodes"]}:
        await expect(node(page, context_id)).to_have_count(1)
    await expect(node(page, "chunk_42")).to_have_class(MARKED)
    await expect(node(page, "doc_contractors_v1")).to_have_class(MARKED)
    await expect(node(page, "summary_1")).to_have_class(MARKED)
    merged = node(page, "summary_1").locator(".mark-text")
    await expect(merged).to_have_attribute("data-reason", "cross_source_merge")
    for unmarked in ("answer_1", "claim_1", "chunk_17", "query_1"):
        await expect(node(page, unmarked)).not_to_have_class(MARKED)
    reasons = node(page, "chunk_42").locator(".mark-text")
    await expect(reasons).to_have_count(2)
    assert {await r.get_attribute("data-reason") for r in await reasons.all()} == {
        "old_transform_version",
        "snapshot_predates_revision",
    }
    changed = node(page, "doc_contractors_v1").locator(".mark-text")
    await expect(changed).to_have_attribute("data-reason", "source_changed")
    await expect(page.locator("#suspicious")).to_contain_text("4 suspicious marks on 3 hops")
    for reason in REASONS:
        await expect(page.locator(f".legend dt[data-reason='{reason}']")).to_have_count(1)
    # The answer on top, each level lower, the documents at the bottom.
    tops = []
    for context_id in ("answer_1", "claim_1", "summary_1", "chunk_42", "doc_contractors_v1"):
        box = await node(page, context_id).bounding_box()
        assert box is not None
        tops.append(box["y"])
    assert tops == sorted(set(tops)), tops


async def check_records(page: Page, chunk_42: dict[str, Any]) -> None:
    await node(page, "chunk_42").click()
    await expect(page.locator("#record")).to_be_visible()
    await expect(field(page, "content hash")).to_have_text(chunk_42["content_hash"])
    await expect(field(page, "transform@version")).to_have_text("chunker@1.4")
    await expect(field(page, "index snapshot")).to_have_text("idx_2026_08_01")
    await expect(page.locator("#record .record-marks li")).to_have_count(2)
    await expect(page.locator("#record .attributes")).to_contain_text('"char_start": 19')
    await node(page, "claim_1").click()
    await expect(field(page, "trace id")).to_have_text(TRACE_ID)
    await expect(field(page, "produced_by")).to_have_text("agent_a/answer@v3")
    await expect(page.locator("#record .verdicts")).to_contain_text("supported")


async def check_blast_radius(page: Page, radius: dict[str, Any], folder: Path) -> None:
    """From the changed document's record to the radius of its source, and its ids as files."""
    await node(page, "doc_contractors_v1").click()
    await page.locator("#record").get_by_text("Every revision's radius").click()
    counts = page.locator("#counts")
    await expect(counts).to_contain_text(f"{radius['summary']['total']} records")
    for kind, count in radius["summary"]["counts_by_kind"].items():
        await expect(counts.locator(".count", has_text=kind)).to_contain_text(str(count))
    await expect(page.locator("table.records tbody tr")).to_have_count(1)
    await expect(page.locator("table.records")).to_contain_text(ANSWER_ID)
    await page.screenshot(path=folder / "blast-radius.png", full_page=True)
    for link, wanted in (
        ("answer-csv", {ANSWER_ID}),
        ("any-csv", {n["context_id"] for n in radius["nodes"]}),
    ):
        async with page.expect_download() as started:
            await page.click(f"a[data-download='{link}']")
        download = await started.value
        saved = folder / download.suggested_filename
        await download.save_as(saved)
        text = await asyncio.to_thread(saved.read_text)
        assert {row["context_id"] for row in csv.DictReader(io.StringIO(text))} == wanted, link


async def test_the_explorer_in_chromium_marks_the_demo_causes_and_downloads_ids(
    demo: PostgresStore, database: Database, database_url: str, client: httpx.AsyncClient,
    chromium: str, artifacts: Path, tmp_path: Path,
) -> None:  # fmt: skip
    await verify_incident(database)
    key, _ = await auth.create_key(database, "default", "read")
    walk = (await client.get(f"/v1/contexts/{ANSWER_ID}/lineage")).json()
    chunk_42 = next(n for n in walk["nodes"] if n["context_id"] == "chunk_42")
    radius = (await client.get("/v1/impact", params={"source_uri": CONTRACTOR_POLICY})).json()
    errors: list[str] = []
    with lineage_serve(database_url, tmp_path) as url:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium)
            page = await browser.new_page(viewport={"width": 1400, "height": 950})
            page.set_default_timeout(15_000)
            page.on("pageerror", lambda error: errors.append(str(error)))
            await page.goto(url)
            await sign_in(page, key)
            await expect(page.locator(".answers")).to_contain_text(ANSWER_ID)

            await search(page, ANSWER_ID)
            await check_walk_back(page, walk)
            await check_records(page, chunk_42)
            await node(page, "chunk_42").click()
            await page.screenshot(path=artifacts / "walk-back.png", full_page=True)
            await check_blast_radius(page, radius, artifacts)

            await search(page, TRACE_ID)
            await expect(page.locator("h1")).to_contain_text(f"Trace {TRACE_ID}")
            await search(page, CONTRACTOR_POLICY)
            await expect(page.locator("h1")).to_contain_text(f"Blast radius of {CONTRACTOR_POLICY}")
            await search(page, "no_such_thing")
            await expect(page.locator(".problem")).to_contain_text("is not a context id")
            await browser.close()
    assert errors == [], errors
