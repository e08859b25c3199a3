"""The SDK's HTTP store (and the log's auditor) against a real server: a refusal comes back as
the error class its problem's rule names (lineage/core/errors.py), an answer the service could
not give now as StoreUnavailable; a spool raises a batch the API will never take instead of
keeping it."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lineage.api.app import create_app
from lineage.core.derive import derive
from lineage.core.errors import BodyTooLarge, Conflict, Forbidden, InvalidRecord, Unauthorized
from lineage.db.database import Database
from lineage.services import auth
from lineage.settings import Settings
from lineage.store.http import HttpStore
from lineage.store.spool import SpoolingStore
from lineage.verifiable_log.audit import HttpSource
from tests import live_server

FORGED = "lk_0000000000000000_forged"
MAX_BODY = 4096
LARGE = {"padding": "b" * (2 * MAX_BODY)}  # attributes a record may carry, in a body too large


@pytest.fixture
def server(database_url: str) -> Iterator[str]:
    settings = Settings(statement_timeout_ms=5000, auth="keys", max_body_bytes=MAX_BODY)
    with live_server.serve(create_app(settings, database_url=database_url)) as url:
        yield url


async def key(database: Database, scope: str) -> str:
    token, _ = await auth.create_key(database, "default", scope)
    return token


async def test_each_refusal_is_the_error_its_rule_names(server: str, database: Database) -> None:
    ingest = HttpStore(server, api_key=await key(database, "ingest"))
    reader = HttpStore(server, api_key=await key(database, "read"))
    stranger = HttpStore(server, api_key=FORGED)
    try:
        with pytest.raises(Unauthorized):
            await derive(stranger, [], "doc", "document", source_uri="s3://a")
        with pytest.raises(Unauthorized):
            await stranger.get("doc_a")
        with pytest.raises(Forbidden):
            await derive(reader, [], "doc", "document", source_uri="s3://a")
        doc = await derive(ingest, [], "doc", "document", source_uri="s3://a")
        assert await reader.get(doc.context_id) == doc.record
        assert await reader.get("ctx_" + "f" * 32) is None
        with pytest.raises(InvalidRecord) as caught:
            await derive(ingest, ["nope"], "chunk", "chunk")
        assert caught.value.rule == "unknown_parent"
        with pytest.raises(Conflict):
            await derive(
                ingest, [], "other", "document", source_uri="s3://a", context_id=doc.context_id
            )
        with pytest.raises(BodyTooLarge):
            await derive(ingest, [], "big", "document", source_uri="s3://b", attributes=LARGE)
    finally:
        for store in (ingest, reader, stranger):
            await store.aclose()


async def test_a_spool_raises_a_batch_too_large_for_the_api(
    server: str, database: Database, tmp_path: Path
) -> None:
    remote = HttpStore(server, api_key=await key(database, "ingest"))
    spooling = SpoolingStore(remote, tmp_path)
    try:
        with pytest.raises(BodyTooLarge):
            await derive(spooling, [], "big", "document", source_uri="s3://b", attributes=LARGE)
        assert spooling.spool.status().records == 0
    finally:
        await spooling.aclose()
        await remote.aclose()


async def test_the_logs_auditor_reads_an_answer_the_same_way(server: str) -> None:
    """What `lineage log verify` reads over HTTP: a refused key is Unauthorized, not an outage."""
    forged = {"Authorization": f"Bearer {FORGED}"}
    async with httpx.AsyncClient(base_url=server, headers=forged) as client:
        with pytest.raises(Unauthorized):
            await HttpSource(client).checkpoint()
