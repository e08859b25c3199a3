"""Fair shares of heavy work against a real server: past its key's or its tenant's limit an
export, an impact file or an event stream is answered 429 with Retry-After at once, while
another tenant's goes on; the slots are given back when the answers end."""

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest

from lineage.api.app import create_app
from lineage.core import metrics
from lineage.db import keyring
from lineage.db.database import Database
from lineage.services import auth
from lineage.services.demo import ANSWER_ID, load_incident
from lineage.settings import Settings
from lineage.store import PostgresStore
from tests import live_server

# Guards against a hang, not a timing assertion.
LIMIT_S = 60.0


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        statement_timeout_ms=60_000,  # a walk waits on the test's lock, not on the timeout
        auth="keys",
        data_dir=tmp_path,
        log_interval_s=0,
        retention_schedule=False,
        signing_keys_file=keyring.keyring_path(Settings()),
        max_heavy_per_key=2,
        max_heavy_per_tenant=3,
        max_event_streams_per_key=2,
        max_event_streams_per_tenant=3,
    )


@pytest.fixture
async def keys(database: Database, owner_database: Database, store: PostgresStore) -> list[str]:
    """Two read keys of tenant default (the demo loaded) and one of tenant rival (the same)."""
    await auth.create_tenant(owner_database, "rival")
    await load_incident(store)
    await load_incident(PostgresStore(database, "rival"))
    return [
        (await auth.create_key(database, "default", "read"))[0],
        (await auth.create_key(database, "default", "read"))[0],
        (await auth.create_key(database, "rival", "read"))[0],
    ]


@asynccontextmanager
async def live(database_url: str, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, database_url=database_url)
    with live_server.serve(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=LIMIT_S) as http:
            yield http


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def refused(answer: httpx.Response) -> bool:
    if answer.status_code != 429:
        return False
    assert answer.headers["retry-after"].isdigit()
    assert answer.json()["rule"] == "concurrency_limit"
    return True


def in_progress(work: str) -> float:
    """The server's count of slots held (it runs in this process: one registry)."""
    prefix = f'lineage_work_in_progress{{work="{work}"}} '
    for line in metrics.exposition()[0].decode().splitlines():
        if line.startswith(prefix):
            return float(line.removeprefix(prefix))
    return 0.0


async def holding(work: str, count: int) -> None:
    """Until `count` slots of `work` are held: the requests sent got theirs."""
    deadline = asyncio.get_running_loop().time() + LIMIT_S
    while (held := in_progress(work)) < count:
        assert asyncio.get_running_loop().time() < deadline, f"{held} {work} slots, not {count}"
        await asyncio.sleep(0.02)


async def test_exports_past_a_keys_or_tenants_share_are_refused_and_others_go_on(
    database_url: str, settings: Settings, keys: list[str], owner: asyncpg.Connection
) -> None:
    first, second, rival = (bearer(key) for key in keys)
    prov = f"/v1/contexts/{ANSWER_ID}/prov"
    async with live(database_url, settings) as http:
        blocker = owner.transaction()
        await blocker.start()
        await owner.execute("LOCK TABLE provenance IN ACCESS EXCLUSIVE MODE")
        held = [
            asyncio.create_task(http.get(prov, headers=first)),
            asyncio.create_task(http.get("/v1/impact/ids?source_uri=s3://policies/contractors.md",
                                         headers=first)),
        ]  # fmt: skip
        await holding("heavy", 2)
        assert refused(await http.get(prov, headers=first))  # the key's third
        held.append(asyncio.create_task(http.get(prov, headers=second)))
        await holding("heavy", 3)
        assert refused(await http.get(prov, headers=second))  # the tenant's fourth
        held.append(asyncio.create_task(http.get(prov, headers=rival)))  # another tenant's
        await holding("heavy", 4)
        await blocker.rollback()
        answers = await asyncio.gather(*held)
        assert [answer.status_code for answer in answers] == [200] * 4
        # Every slot was given back with its answer.
        again = await asyncio.gather(*(http.get(prov, headers=first) for _ in range(2)))
        assert [answer.status_code for answer in again] == [200, 200]


async def test_event_streams_are_counted_per_key_and_capped(
    database_url: str, settings: Settings, keys: list[str]
) -> None:
    first, second, rival = (bearer(key) for key in keys)
    async with live(database_url, settings) as http, AsyncExitStack() as streams:
        lines = []  # each stream's reader, kept: a reader let go closes its stream

        async def stream(headers: dict[str, str]) -> httpx.Response:
            answer = await streams.enter_async_context(
                http.stream("GET", "/v1/events", headers=headers)
            )
            if answer.status_code == 200:
                lines.append(answer.aiter_lines())
                await anext(lines[-1])  # ": stream open after N": it is counted
            else:
                await answer.aread()
            return answer

        assert [(await stream(first)).status_code for _ in range(2)] == [200, 200]
        assert refused(await stream(first))
        assert (await stream(second)).status_code == 200
        assert refused(await stream(second))  # the tenant's fourth
        assert (await stream(rival)).status_code == 200
        assert (await http.get("/healthz")).status_code == 200

    async with live(database_url, settings) as http:
        for _ in range(3):  # each stream closed gives its slot back
            async with http.stream("GET", "/v1/events", headers=first) as answer:
                assert answer.status_code == 200
                await anext(answer.aiter_lines())
