"""Degrade-open recording: a store outage never reaches the pipeline, and loses nothing.

The outages are real: a private PostgreSQL (tests/private_postgres.py) stopped and started in
the middle of a run, or a lineage API address where nothing listens.
"""

import asyncio
import json
import random
import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY
from typer.testing import CliRunner

from lineage import cli
from lineage.api.app import create_app
from lineage.core.derive import Context, Derivation, derive, derive_many
from lineage.core.errors import Conflict, Forbidden, InvalidRecord, Unauthorized
from lineage.core.record import NewContext
from lineage.db.database import Database
from lineage.db.migrate import migrate
from lineage.services import auth
from lineage.settings import Settings
from lineage.store import HttpStore, PostgresStore
from lineage.store.spool import SpooledBatch, SpoolFile, SpoolingStore
from tests.conftest import database_at
from tests.private_postgres import PrivatePostgres, free_port, private_postgres

RUN_LENGTH = 3000


@pytest.fixture(scope="module")
def private() -> Iterator[PrivatePostgres]:
    with private_postgres() as server:
        migrate(server.url)
        yield server


@pytest.fixture
async def private_database(private: PrivatePostgres) -> AsyncIterator[Database]:
    async with database_at(private.url, max_size=4) as database:
        yield database


@pytest.fixture
async def down_store() -> AsyncIterator[HttpStore]:
    """A lineage API address where nothing listens: every call is refused."""
    store = HttpStore(f"http://127.0.0.1:{free_port()}", timeout_s=2)
    yield store
    await store.aclose()


def degraded(reason: str) -> float:
    return REGISTRY.get_sample_value("lineage_degraded_total", {"reason": reason}) or 0.0


def spool_depth() -> float | None:
    return REGISTRY.get_sample_value("lineage_spool_depth")


async def stored_parents(url: str, context_ids: list[str]) -> dict[str, list[str]]:
    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch(
            "SELECT context_id, parent_ids FROM provenance WHERE context_id = ANY($1)",
            context_ids,
        )
    finally:
        await connection.close()
    return {row["context_id"]: list(row["parent_ids"]) for row in rows}


async def provenance_rows(url: str) -> int:
    connection = await asyncpg.connect(url)
    try:
        total: int = await connection.fetchval("SELECT count(*) FROM provenance")
    finally:
        await connection.close()
    return total


def trace_id(step: int) -> str:
    return f"{step + 1:032x}"


@pytest.mark.slow
async def test_a_database_outage_mid_run_loses_nothing(
    private: PrivatePostgres,
    private_database: Database,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Thousands of derive() calls in a DAG; the database stops a third of the way in and comes
    back at two thirds: nothing raises, and every record ends up stored once, parents right."""
    store = SpoolingStore(
        PostgresStore(private_database),
        tmp_path,
        retry_min_s=0.01,
        retry_max_s=0.1,
    )
    rows_before = await provenance_rows(private.url)
    failures_before = degraded("store_unavailable")
    rng = random.Random(5)
    made: list[Context] = []
    depth_during_outage = None
    for step in range(RUN_LENGTH):
        if step == RUN_LENGTH // 3:
            private.stop("immediate")
        if step == 2 * RUN_LENGTH // 3:
            depth_during_outage = spool_depth()
            private.start()
        if step % 10 == 0:
            parents: list[Context] = []
            kind, source_uri = "document", f"s3://docs/{step}"
        else:
            recent = made[-30:]
            parents = rng.sample(recent, k=min(len(recent), rng.randint(1, 3)))
            kind, source_uri = rng.choice(["chunk", "summary", "claim", "answer"]), None
        made.append(
            await derive(
                store,
                parents,
                f"unit {step}",
                kind,
                "step",
                "1.0",
                source_uri=source_uri,
                trace_id=trace_id(step),
            )
        )
    replay = await store.replay()
    await store.aclose()

    spooled = [context for context in made if context.spooled]
    assert len(spooled) >= RUN_LENGTH // 3, "everything derived during the outage is spooled"
    assert not made[0].spooled and not made[-1].spooled
    assert replay.rejected == replay.remaining == 0
    assert not store.spool.waiting()
    expected = {context.context_id: context.parent_ids for context in made}
    assert await stored_parents(private.url, list(expected)) == expected
    assert await provenance_rows(private.url) == rows_before + RUN_LENGTH
    outage_warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(trace_id(RUN_LENGTH // 3) in message for message in outage_warnings)
    assert degraded("store_unavailable") > failures_before
    assert depth_during_outage is not None and depth_during_outage >= RUN_LENGTH // 3
    assert spool_depth() == 0


async def test_validation_errors_still_raise_while_the_store_is_down(
    down_store: HttpStore, tmp_path: Path
) -> None:
    store = SpoolingStore(down_store, tmp_path)
    doc = await derive(store, [], "doc", "document", source_uri="s3://d")
    assert doc.spooled
    with pytest.raises(InvalidRecord) as caught:
        await derive(store, [], "orphan", "chunk")
    assert caught.value.rule == "missing_parents"
    with pytest.raises(InvalidRecord) as duplicate:
        await derive_many(
            store,
            [
                Derivation([doc], "a", "chunk", context_id="chunk_1"),
                Derivation([doc], "b", "chunk", context_id="chunk_1"),
            ],
        )
    assert duplicate.value.rule == "duplicate_id"
    assert store.spool.status().records == 1
    await store.aclose()


async def test_conflicts_raise_when_the_store_is_up(store: PostgresStore, tmp_path: Path) -> None:
    spooling = SpoolingStore(store, tmp_path)
    first = await derive(spooling, [], "v1", "document", source_uri="s3://a", context_id="doc_a")
    assert not first.spooled
    with pytest.raises(Conflict):
        await derive(spooling, [], "v2", "document", source_uri="s3://a", context_id="doc_a")
    assert not spooling.spool.waiting()


async def test_spooled_records_replay_once_even_if_some_were_stored(
    down_store: HttpStore, store: PostgresStore, owner: asyncpg.Connection, tmp_path: Path
) -> None:
    """What an unreachable API could not take replays into the database; a record that did
    commit before the connection broke replays as a no-op, not as a second row."""
    offline = SpoolingStore(down_store, tmp_path)
    doc = await derive(offline, [], "policy", "document", "loader", "1", source_uri="s3://p")
    chunk, summary = await derive_many(
        offline,
        [
            Derivation([doc], "chunk text", "chunk", "chunker", "2"),
            Derivation([doc], "summary text", "summary", "summarise", "1"),
        ],
    )
    assert doc.spooled and chunk.spooled and summary.spooled
    assert chunk.text == "chunk text" and chunk.parent_ids == [doc.context_id]
    assert chunk.record.content_hash.startswith("sha256:")
    await offline.aclose()
    await store.append([NewContext(**doc.record.model_dump(exclude={"tenant_id", "created_at"}))])

    online = SpoolingStore(store, tmp_path)
    replay = await online.replay()
    assert (replay.replayed, replay.rejected, replay.remaining) == (3, 0, 0)
    assert (await online.replay()).replayed == 0
    rows = await owner.fetch("SELECT context_id, parent_ids FROM provenance")
    assert {row["context_id"]: list(row["parent_ids"]) for row in rows} == {
        doc.context_id: [],
        chunk.context_id: [doc.context_id],
        summary.context_id: [doc.context_id],
    }


async def test_a_record_the_store_refuses_on_replay_moves_aside(
    down_store: HttpStore, store: PostgresStore, owner: asyncpg.Connection, tmp_path: Path
) -> None:
    """A parent that never existed cannot be known while the store is down; on replay its
    record and what derives from it are set aside with the reason, the rest goes in."""
    offline = SpoolingStore(down_store, tmp_path)
    doc = await derive(offline, [], "doc", "document", source_uri="s3://d")
    orphan = await derive(offline, ["ctx_never_recorded"], "orphan", "chunk")
    await derive(offline, [orphan], "child of orphan", "summary")
    sibling = await derive(offline, [doc], "sibling", "chunk")
    await offline.aclose()
    rejected_before = degraded("spool_rejected")

    online = SpoolingStore(store, tmp_path)
    replay = await online.replay()
    assert (replay.replayed, replay.rejected, replay.remaining) == (2, 2, 0)
    stored = {row["context_id"] for row in await owner.fetch("SELECT context_id FROM provenance")}
    assert stored == {doc.context_id, sibling.context_id}
    lines = online.spool.rejected_path.read_text().splitlines()
    assert ["unknown_parent" in line for line in lines] == [True, True]
    assert json.loads(lines[0])["records"][0]["context_id"] == orphan.context_id
    assert online.spool.status().rejected_batches == 2
    assert degraded("spool_rejected") == rejected_before + 2


@pytest.mark.needs_database
async def test_the_spool_drains_by_itself_when_the_store_is_back(
    private: PrivatePostgres, private_database: Database, tmp_path: Path
) -> None:
    store = SpoolingStore(
        PostgresStore(private_database),
        tmp_path,
        retry_min_s=0.05,
        retry_max_s=0.2,
    )
    private.stop("fast")
    try:
        doc = await derive(store, [], "doc", "document", source_uri="s3://later")
        chunk = await derive(store, [doc], "chunk", "chunk")
    finally:
        private.start()
    assert doc.spooled and chunk.spooled
    for _ in range(600):  # no further append: the background retry must drain it
        if not store.spool.waiting():
            break
        await asyncio.sleep(0.05)
    await store.aclose()
    assert not store.spool.waiting()
    assert await stored_parents(private.url, [doc.context_id, chunk.context_id]) == {
        doc.context_id: [],
        chunk.context_id: [doc.context_id],
    }


def test_a_line_torn_by_a_crash_is_dropped_not_glued(tmp_path: Path) -> None:
    spool = SpoolFile(tmp_path, "default")
    spool.prepare()
    first = NewContext(
        context_id="doc_1", kind="document", source_uri="s3://1", content_hash="sha256:" + "a" * 64
    )
    second = NewContext(
        context_id="doc_2", kind="document", source_uri="s3://2", content_hash="sha256:" + "b" * 64
    )
    spool.add(SpooledBatch(datetime.now(UTC), [first]))
    with spool.path.open("ab") as handle:
        handle.write(b'{"spooled_at":"2026-01-01T00:00:00+00:00","records":[{"context_')
    assert [batch.records for batch in spool.batches()] == [[first]]
    spool.add(SpooledBatch(datetime.now(UTC), [second]))
    assert [batch.records for batch in spool.batches()] == [[first], [second]]
    assert spool.path.stat().st_mode & 0o777 == 0o600  # records name sources and traces


async def test_spool_status_and_replay_commands(
    database_url: str, owner: asyncpg.Connection, tmp_path: Path
) -> None:
    spool = SpoolFile(tmp_path / "spool", "default")
    spool.prepare()
    doc = NewContext(
        context_id="doc_cli",
        kind="document",
        source_uri="s3://cli",
        content_hash="sha256:" + "c" * 64,
    )
    spool.add(SpooledBatch(datetime.now(UTC), [doc]))
    env = {
        "LINEAGE_DATABASE_URL": database_url,
        "LINEAGE_DATA_DIR": str(tmp_path),
        "COLUMNS": "200",
    }

    async def run(*args: str) -> str:
        result = await asyncio.to_thread(CliRunner().invoke, cli.app, list(args), env=env)
        assert result.exit_code == 0, (result.output, result.exception)
        return result.output

    status = await run("spool", "status")
    assert re.search(r"^default +1 +1 ", status, re.M), status  # one batch of one record
    assert "1 replayed, 0 rejected" in await run("spool", "replay")
    assert await owner.fetchval("SELECT count(*) FROM provenance WHERE context_id = 'doc_cli'") == 1
    assert "nothing spooled" in await run("spool", "status")


@pytest.mark.needs_database
def test_a_script_starts_and_runs_while_the_database_is_down(
    private: PrivatePostgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lineage.store.sync import SyncLineage

    monkeypatch.setenv("LINEAGE_DATA_DIR", str(tmp_path))
    private.stop("fast")
    try:
        with SyncLineage(private.url) as lineage:  # starting needs no connection
            doc = lineage.derive([], "script doc", "document", source_uri="s3://script")
            chunk = lineage.derive([doc], "script chunk", "chunk")
            assert doc.spooled and chunk.spooled
    finally:
        private.start()
    with SyncLineage(private.url) as lineage:
        after = lineage.derive([], "next run", "document", source_uri="s3://script-2")
        assert not after.spooled  # the spool drained first, in order, then this one
    stored = asyncio.run(stored_parents(private.url, [doc.context_id, chunk.context_id]))
    assert stored == {doc.context_id: [], chunk.context_id: [doc.context_id]}


@pytest.fixture
async def keyed_api(database_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Database]]:
    """The API as deployed with keys, and its Database to make and revoke them."""
    app = create_app(Settings(auth="keys"), database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as http:
            yield http, app.state.db


def keyed_store(http: httpx.AsyncClient, token: str) -> HttpStore:
    http.headers["Authorization"] = f"Bearer {token}"
    return HttpStore("http://lineage", client=http)


async def test_a_revoked_or_unscoped_key_is_spooled_and_counted_not_raised(
    keyed_api: tuple[httpx.AsyncClient, Database],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    http, database = keyed_api
    revoked, described = await auth.create_key(database, "default", "ingest")
    await auth.revoke_key(database, "default", described["key_id"])
    reader, _ = await auth.create_key(database, "default", "read")
    before = degraded("credentials_refused")
    for index, token in enumerate((revoked, reader, "lk_0000000000000000_forged")):
        spooling = SpoolingStore(keyed_store(http, token), tmp_path, retry_min_s=60)
        try:
            doc = await derive(
                spooling, [], f"text {index}", "document", source_uri=f"s3://{index}"
            )
        finally:
            await spooling.aclose()
        assert doc.spooled
    assert degraded("credentials_refused") == before + 3
    assert "refused the key" in caplog.text
    assert not (tmp_path / "default.jsonl.rejected").exists()  # waits for a fixed key

    writer, _ = await auth.create_key(database, "default", "ingest")
    spooling = SpoolingStore(keyed_store(http, writer), tmp_path)
    try:
        assert (await spooling.replay()).replayed == 3
    finally:
        await spooling.aclose()


async def test_strict_mode_raises_a_refused_key(
    keyed_api: tuple[httpx.AsyncClient, Database], tmp_path: Path
) -> None:
    http, database = keyed_api
    reader, _ = await auth.create_key(database, "default", "read")
    for token, error in ((reader, Forbidden), ("lk_0000000000000000_forged", Unauthorized)):
        spooling = SpoolingStore(keyed_store(http, token), tmp_path, strict=True)
        try:
            with pytest.raises(error):
                await derive(spooling, [], "strict", "document", source_uri="s3://strict")
        finally:
            await spooling.aclose()
    assert not (tmp_path / "default.jsonl").exists()
