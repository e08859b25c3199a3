"""The HTTP API on Citus answers what it answers on plain PostgreSQL: the same records loaded
into both (the demo and generated records in two tenants, tests/test_citus.py's load), one app
on each, and every GET route of the OpenAPI schema (walk-back, suspicious hops, impact by id,
source, transform version and snapshot, freshness, traces, claims, verdicts, log proofs), the
writes that answer with what they did (verify, forget) and the event stream replayed from the
start, compared body by body once the clock's and the signatures' values are set aside."""

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from lineage.api.app import create_app
from lineage.db.distribute import distribute
from lineage.db.migrate import migrate
from lineage.services import auth
from lineage.services.demo import ANSWER_ID, CONTRACTOR_POLICY, TRACE_ID
from lineage.settings import Settings
from tests import live_server
from tests.citus_cluster import CitusCluster, move_tenant_shards
from tests.conftest import database_at
from tests.test_citus import load

pytestmark = [pytest.mark.citus, pytest.mark.slow]

TENANT = "acme"
HANG_GUARD_S = 60.0
REQUEST_ID = "req-1"
PATH_VALUES = {
    "context_id": ANSWER_ID,
    "answer_id": ANSWER_ID,
    "trace_id": TRACE_ID,
    "request_id": REQUEST_ID,
}
# Query values for the routes that need them, and the other ways to ask /v1/impact.
QUERIES: dict[str, list[dict[str, str]]] = {
    "/v1/impact": [
        {"source_uri": CONTRACTOR_POLICY},
        {"transform_version": "chunker@1.4"},
        {"index_snapshot": "idx_2026_08_01"},
        {"source_uri": CONTRACTOR_POLICY, "kind": "answer"},
    ],
    "/v1/freshness": [{"source_uri": CONTRACTOR_POLICY}, {"kind": "answer"}],
    "/v1/impact/page": [{"source_uri": CONTRACTOR_POLICY}, {"context_id": "chunk_42"}],
    "/v1/impact/ids": [
        {"source_uri": CONTRACTOR_POLICY, "format": "json"},
        {"source_uri": CONTRACTOR_POLICY},  # CSV, copied out by the server
        {"transform_version": "chunker@1.4"},
    ],
    "/v1/contexts": [{"kind": "all", "limit": "200"}, {"kind": "chunk"}],
    "/v1/contexts/{context_id}/impact": [{}, {"kind": "answer"}],
    "/v1/contexts/{context_id}/lineage": [{}, {"max_depth": "2"}, {"layers": "true"}],
}
# Not data of the tenant: documentation, metrics, the audit of these very calls, key ids.
# /readyz is the server's own state (it names its PostgreSQL version: 18 when the plain side is
# the embedded server, 15 on Citus), not the tenant's data.
SKIPPED = {"/metrics", "/v1/audit", "/v1/keys", "/docs", "/redoc", "/v1/events", "/readyz"}
# Set by the clock of the server that ran a write, or signing what the clock set (a record's
# signature and log leaf cover its created_at), or the request itself.
CLOCK_KEYS = {
    "created_at", "first_seen", "first_verdict_at", "at", "signed_at", "updated_at",
    "generated_at", "elapsed_ms", "captured_at", "verified_at", "signature", "root_hash",
    "leaf_hash", "hash", "checkpoint", "receipt", "next", "note",
}  # fmt: skip
# Lists of log hashes (over leaves that cover created_at): compared by length.
HASH_LISTS = {"proof", "audit_path", "consistency_path", "path"}
# A signed checkpoint note: origin, tree size, then the root hash and signature (clock-set).
CHECKPOINT_NOTE = re.compile(r"^(lineage/[^\n]*\n\d+\n).*", re.DOTALL)
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")


def comparable(value: Any, names: dict[str, str]) -> Any:
    """The value with what the clock set replaced by a placeholder, and the ids the service
    made up by their `names`; the rest as it is."""
    if isinstance(value, dict):
        return {
            k: "C" if k in CLOCK_KEYS else len(v) if k in HASH_LISTS else comparable(v, names)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [comparable(item, names) for item in value]
    if isinstance(value, str):
        for made_up, name in names.items():
            value = value.replace(made_up, name)
        return TIMESTAMP.sub("T", CHECKPOINT_NOTE.sub(r"\1R", value))
    return value


@dataclass
class Backend:
    url: str
    token: str  # an admin key of TENANT
    tree_size: int
    names: dict[str, str]  # ids of records the service made up (verdicts) -> stable names

    def body(self, response: httpx.Response) -> Any:
        """JSON, NDJSON (a line each) or text, made comparable."""
        kind = response.headers.get("content-type", "")
        if "ndjson" in kind:
            lines = response.text.splitlines()
            return [comparable(json.loads(line), self.names) for line in lines if line]
        if "json" in kind:
            return comparable(response.json(), self.names)
        return comparable(response.text, self.names)


def first_difference(got: Any, expected: Any, where: str = "") -> str | None:
    """Where two bodies first differ, and how, for the assertion message."""
    if isinstance(got, dict) and isinstance(expected, dict):
        for key in sorted(set(got) | set(expected)):
            found = first_difference(got.get(key), expected.get(key), f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(got, list | tuple) and isinstance(expected, list | tuple):
        if len(got) != len(expected):
            return f"{where}: {len(got)} items, not {len(expected)}"
        for index, (left, right) in enumerate(zip(got, expected, strict=True)):
            found = first_difference(left, right, f"{where}[{index}]")
            if found:
                return found
        return None
    return None if got == expected else f"{where}: {got!r:.200} instead of {expected!r:.200}"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def settings(data_dir: Path) -> Settings:
    # One keyring for both apps; no background log rounds (each route's log state is the one
    # the checkpoint below fixed).
    return Settings(auth="keys", bad_request_limit=1000, log_interval_s=0, data_dir=data_dir)


@asynccontextmanager
async def app_client(url: str, data_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings(data_dir), database_url=url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://lineage", timeout=HANG_GUARD_S
        ) as http:
            yield http


async def prepare(url: str, data_dir: Path) -> Backend:
    """The shared load, an admin key, a recorded query, a verdict, a checkpoint."""
    await load(url)
    async with database_at(url) as database:
        token, _ = await auth.create_key(database, TENANT, "admin")
    async with app_client(url, data_dir) as http:
        query = {"request_id": REQUEST_ID, "query": "notice period?", "answer": "30 days"}
        recorded = await http.post("/v1/queries", json=query, headers=bearer(token))
        assert recorded.status_code == 201, recorded.text
        verified = await http.post(f"/v1/answers/{ANSWER_ID}/verify", headers=bearer(token))
        assert verified.status_code == 200, verified.text
        checkpoint = await http.get("/v1/log/checkpoint", headers=bearer(token))
        assert checkpoint.status_code == 200, checkpoint.text
    owner = await asyncpg.connect(url)
    try:
        made_up = await owner.fetch(
            "SELECT context_id FROM provenance WHERE tenant_id = $1 AND kind = 'verdict' "
            "ORDER BY created_at, context_id",
            TENANT,
        )
    finally:
        await owner.close()
    assert made_up
    names = {row["context_id"]: f"verdict_{n}" for n, row in enumerate(made_up)}
    return Backend(url, token, checkpoint.json()["tree_size"], names)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("citus-api")


@pytest.fixture(scope="module")
def backends(
    citus: CitusCluster, template_db: tuple[str, str], data_dir: Path
) -> Iterator[tuple[Backend, Backend]]:
    """(plain PostgreSQL, Citus), the same records and calls in both."""
    from tests.conftest import janitor, url_for

    base, template = template_db
    name = f"lineage_citus_api_{uuid.uuid4().hex[:8]}"
    citus_url = citus.create_database(name)
    migrate(citus_url)
    distribute(citus_url)
    with janitor(base, name, template):
        plain = asyncio.run(prepare(url_for(base, name), data_dir))
        on_citus = asyncio.run(prepare(citus_url, data_dir))
        assert plain.tree_size == on_citus.tree_size
        yield plain, on_citus


def get_calls(
    paths: dict[str, dict[str, Any]], tree_size: int
) -> list[tuple[str, str, dict[str, str]]]:
    """Every GET of the schema that reads the tenant's data: (path, URL, query), once per way
    of asking it."""
    proofs = {
        "/v1/log/proof/inclusion": [{"context_id": ANSWER_ID, "tree_size": str(tree_size)}],
        "/v1/log/proof/consistency": [{"first": "1", "second": str(tree_size)}],
    }
    calls = []
    for path, operations in paths.items():
        if "get" not in operations or path in SKIPPED:
            continue
        url = path
        for name in re.findall(r"{(\w+)}", path):
            url = url.replace(f"{{{name}}}", PATH_VALUES[name])
        for query in {**QUERIES, **proofs}.get(path, [{}]):
            calls.append((path, url, query))
    return calls


async def get_differences(backends: tuple[Backend, Backend], data_dir: Path) -> list[str]:
    """Each GET call whose answer on Citus differs from plain PostgreSQL's, and how."""
    plain, on_citus = backends
    schema = create_app(settings(data_dir)).openapi()
    calls = get_calls(schema["paths"], plain.tree_size)
    assert {path for path, _, _ in calls} >= {
        "/v1/contexts/{context_id}/lineage", "/v1/contexts/{context_id}/suspicious",
        "/v1/contexts/{context_id}/impact", "/v1/impact", "/v1/freshness", "/v1/traces/{trace_id}",
        "/v1/reports/claims", "/v1/answers/{answer_id}/verdicts", "/v1/log/proof/inclusion",
        "/v1/log/proof/consistency",
    }  # fmt: skip
    differ = []
    async with (
        app_client(plain.url, data_dir) as on_plain,
        app_client(on_citus.url, data_dir) as on_distributed,
    ):
        for path, url, query in calls:
            expected = await on_plain.get(url, params=query, headers=bearer(plain.token))
            got = await on_distributed.get(url, params=query, headers=bearer(on_citus.token))
            assert expected.status_code == 200, (path, query, expected.text)
            found = first_difference(
                (got.status_code, on_citus.body(got)), (expected.status_code, plain.body(expected))
            )
            if found:
                differ.append(f"{path} {query}: {found}")
    return differ


async def test_every_get_route_answers_on_citus_what_it_answers_on_postgresql(
    backends: tuple[Backend, Backend], data_dir: Path
) -> None:
    differ = await get_differences(backends, data_dir)
    assert not differ, "\n".join(differ)


async def test_the_walks_answer_the_demo_on_citus(
    backends: tuple[Backend, Backend], data_dir: Path
) -> None:
    """Not only equal: the comparison must not pass by both answering nothing."""
    _, on_citus = backends
    async with app_client(on_citus.url, data_dir) as http:
        lineage = await http.get(
            f"/v1/contexts/{ANSWER_ID}/lineage", headers=bearer(on_citus.token)
        )
        hops = await http.get(
            f"/v1/contexts/{ANSWER_ID}/suspicious", headers=bearer(on_citus.token)
        )
    assert {"chunk_42", "doc_contractors_v1"} <= set(re.findall(r'"(\w+)"', lineage.text))
    assert "old_transform_version" in hops.text


async def replayed_events(backend: Backend, data_dir: Path, count: int) -> list[Any]:
    """The first `count` events of the tenant's stream, replayed from position 0."""
    app = create_app(settings(data_dir), database_url=backend.url)
    events: list[Any] = []
    with live_server.serve(app) as url:
        async with (
            httpx.AsyncClient(base_url=url, timeout=HANG_GUARD_S) as http,
            http.stream(
                "GET", "/v1/events", params={"after": "0"}, headers=bearer(backend.token)
            ) as response,
        ):
            assert response.status_code == 200
            event_id = None
            async with asyncio.timeout(HANG_GUARD_S):
                async for line in response.aiter_lines():
                    if line.startswith("id:"):
                        event_id = line.removeprefix("id:").strip()
                    elif line.startswith("data:"):
                        record = json.loads(line.removeprefix("data:"))
                        events.append([event_id, comparable(record, backend.names)])
                        if len(events) == count:
                            break
    return events


async def test_the_event_stream_replays_the_same_records_in_the_same_positions(
    backends: tuple[Backend, Backend], data_dir: Path
) -> None:
    plain, on_citus = backends
    count = 50
    expected = await replayed_events(plain, data_dir, count)
    got = await replayed_events(on_citus, data_dir, count)
    assert [position for position, _ in expected] == [str(n) for n in range(1, count + 1)]
    assert got == expected


async def test_after_the_tenants_shards_move_every_get_route_still_answers_alike(
    backends: tuple[Backend, Backend], data_dir: Path
) -> None:
    """citus_move_shard_placement of the tenant's shard group, as a rebalance would."""
    move_tenant_shards(backends[1].url, TENANT)
    differ = await get_differences(backends, data_dir)
    assert not differ, "\n".join(differ)


async def test_forget_forgets_the_same_records_on_citus(
    backends: tuple[Backend, Backend], data_dir: Path
) -> None:
    """Last: it changes what the routes above answer."""
    answers = []
    for backend in backends:
        async with app_client(backend.url, data_dir) as http:
            forgotten = await http.post(
                "/v1/forget", json={"source_uri": CONTRACTOR_POLICY}, headers=bearer(backend.token)
            )
            assert forgotten.status_code == 200, forgotten.text
            for n, made_up in enumerate(forgotten.json()["tombstone_ids"]):
                backend.names[made_up] = f"tombstone_{n}"
            walked = await http.get(
                f"/v1/contexts/{ANSWER_ID}/lineage", headers=bearer(backend.token)
            )
            answers.append((backend.body(forgotten), walked.status_code, backend.body(walked)))
    assert first_difference(answers[1], answers[0]) is None, first_difference(
        answers[1], answers[0]
    )
    assert "chunk_42" in json.dumps(answers[0][0])
