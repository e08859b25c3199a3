"""The LangChain and LlamaIndex hooks over HTTP, as an app team runs them: the service's URL and an
ingest key, no database credentials and no signing keys. Real frameworks, a real server; the
service down while the pipeline runs, then back."""

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from lineage.api.app import create_app
from lineage.core import DEFAULT_TENANT
from lineage.core.derive import Context, Derivation
from lineage.core.errors import BadParameter
from lineage.db.database import Database
from lineage.services import auth, walks
from lineage.settings import Settings
from lineage.store.spool import SpoolFile, spool_dir
from lineage.store.sync import SyncLineage
from tests import live_server

# The frameworks touch deprecated APIs of their own; pytest would raise those in their hooks.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

DOCUMENTS = {
    "kb/refunds.md": "Refunds are paid within 14 days.\n\nRefunds go back to the original card.",
    "kb/shipping.md": "Shipping is free over 50 euros.\n\nParcels arrive in 3 working days.",
}
QUESTIONS = ["How many days until refunds are paid?", "Is shipping free?"]
NEVER_RECORDED = "never_recorded_"


def langchain_pipeline(lineage: SyncLineage, unknown_chunks: bool = False) -> list[str]:
    """Index the documents, ask each question through a chain; the answers recorded.
    `unknown_chunks`: the retriever names ids never recorded instead of the chunks it found."""
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.retrievers import BaseRetriever

    from lineage.integrations.langchain import LineageCallbackHandler, index_documents

    class ParagraphSplitter:
        def split_text(self, text: str) -> list[str]:
            return text.split("\n\n")

    class FirstWordRetriever(BaseRetriever):
        chunks: list[Document]

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            word = query.rsplit(maxsplit=1)[-1].strip("?").lower()
            found = [c for c in self.chunks if word in c.page_content.lower()] or self.chunks[:1]
            return [
                Document(
                    c.page_content,
                    metadata={
                        **c.metadata,
                        "context_id": NEVER_RECORDED * unknown_chunks + c.metadata["context_id"],
                        "score": 1.0,
                    },
                )
                for c in found
            ]

    documents = [Document(page_content=t, metadata={"source": s}) for s, t in DOCUMENTS.items()]
    chunks = index_documents(lineage, documents, ParagraphSplitter())
    handler = LineageCallbackHandler(lineage, index_snapshot="kb@1")
    chain = (
        FirstWordRetriever(chunks=chunks)
        | (lambda found: "\n".join(d.page_content for d in found))
        | FakeListChatModel(responses=["Within 14 days.", "Over 50 euros."])
    )
    for question in QUESTIONS:
        assert chain.invoke(question, config={"callbacks": [handler]}).content
    return handler.answers


def llama_index_pipeline(lineage: SyncLineage, unknown_chunks: bool = False) -> list[str]:
    """Ingest the documents, ask each question through a query engine; the answers recorded.
    `unknown_chunks`: the nodes are renamed after ingestion, so queries name ids never recorded."""
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.llms import MockLLM
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index_instrumentation import get_dispatcher

    from lineage.integrations.llamaindex import LineageEventHandler, LineageTransformation

    splitter = SentenceSplitter(chunk_size=64, chunk_overlap=0)
    pipeline = IngestionPipeline(transformations=[LineageTransformation(lineage, splitter)])
    documents = [Document(text=t, metadata={"file_path": s}) for s, t in DOCUMENTS.items()]
    nodes = pipeline.run(documents=documents)
    for node in nodes if unknown_chunks else []:
        node.id_ = NEVER_RECORDED + node.id_
    index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    handler = LineageEventHandler(lineage, index_snapshot=index.index_id)
    dispatcher = get_dispatcher()
    dispatcher.add_event_handler(handler)
    try:
        engine = index.as_query_engine(
            llm=MockLLM(max_tokens=8), embed_model=MockEmbedding(embed_dim=8), similarity_top_k=1
        )
        for question in QUESTIONS:
            assert str(engine.query(question))
    finally:
        dispatcher.event_handlers.remove(handler)
    return handler.answers


Pipeline = Callable[..., list[str]]
PIPELINES = pytest.mark.parametrize(
    "pipeline", [langchain_pipeline, llama_index_pipeline], ids=["langchain", "llamaindex"]
)


def keyed_app(database_url: str) -> FastAPI:
    return create_app(Settings(statement_timeout_ms=5000, auth="keys"), database_url=database_url)


async def ingest_key(database: Database) -> str:
    token, _ = await auth.create_key(database, DEFAULT_TENANT, "ingest")
    return token


def spooled_ids(data_dir: Path) -> list[str]:
    spool = SpoolFile(spool_dir(Settings(data_dir=data_dir)), DEFAULT_TENANT)
    return [record.context_id for batch in spool.batches() for record in batch.records]


async def walked_kinds(database: Database, answer_id: str) -> list[str]:
    settings = Settings(statement_timeout_ms=5000)
    walk = await walks.walk_back(database, settings, DEFAULT_TENANT, answer_id, None)
    return [node["kind"] for node in walk.nodes]


@PIPELINES
async def test_the_hooks_record_over_http_with_an_ingest_key_alone(
    pipeline: Pipeline, database: Database, database_url: str, tmp_path: Path
) -> None:
    key = await ingest_key(database)
    with live_server.serve(keyed_app(database_url)) as url:
        lineage = SyncLineage(url, api_key=key, settings=Settings(data_dir=tmp_path))
        try:
            answers = await asyncio.to_thread(pipeline, lineage)
        finally:
            await asyncio.to_thread(lineage.close)
        async with httpx.AsyncClient(base_url=url) as http:
            bearer = {"Authorization": f"Bearer {key}"}
            read = await http.get(f"/v1/contexts/{answers[0]}", headers=bearer)
    assert read.status_code == 403  # not even a read: the key only appends
    assert len(answers) == len(QUESTIONS)
    for answer in answers:
        assert await walked_kinds(database, answer) == ["answer", "retrieval", "chunk", "document"]
    assert spooled_ids(tmp_path) == []


@PIPELINES
async def test_while_the_service_is_down_the_pipeline_runs_and_its_records_arrive_later_once(
    pipeline: Pipeline,
    database: Database,
    database_url: str,
    owner: asyncpg.Connection,
    tmp_path: Path,
) -> None:
    key = await ingest_key(database)
    listening = live_server.bound_socket()  # the service's port, refusing connections
    lineage = SyncLineage(
        live_server.url_of(listening), api_key=key, settings=Settings(data_dir=tmp_path)
    )
    try:
        answers = await asyncio.to_thread(pipeline, lineage)
        still_down = await asyncio.to_thread(lineage.flush)
        spooled = spooled_ids(tmp_path)
        assert len(answers) == len(QUESTIONS) and set(answers) <= set(spooled)
        assert (still_down.replayed, still_down.remaining) == (0, len(spooled))
        assert await owner.fetchval("SELECT count(*) FROM provenance") == 0
        spool_file = SpoolFile(spool_dir(Settings(data_dir=tmp_path)), DEFAULT_TENANT).path
        spooled_lines = spool_file.read_bytes()
        with live_server.serve(keyed_app(database_url), listening):
            back = await asyncio.to_thread(lineage.flush)
            assert (back.replayed, back.rejected, back.remaining) == (len(spooled), 0, 0)
            # An answer lost after its batch committed: the same batches sent again.
            spool_file.write_bytes(spooled_lines)
            again = await asyncio.to_thread(lineage.flush)
            assert (again.replayed, again.rejected, again.remaining) == (len(spooled), 0, 0)
    finally:
        await asyncio.to_thread(lineage.close)
    stored = await owner.fetch("SELECT context_id, parent_ids FROM provenance")
    assert sorted(row["context_id"] for row in stored) == sorted(spooled)  # each once
    parents = {row["context_id"]: row["parent_ids"] for row in stored}
    for position, context_id in enumerate(spooled):  # in order: parents spooled first
        assert set(parents[context_id]) <= set(spooled[:position])
    assert spooled_ids(tmp_path) == []
    for answer in answers:
        assert await walked_kinds(database, answer) == ["answer", "retrieval", "chunk", "document"]


@PIPELINES
async def test_what_the_service_refuses_is_set_aside_and_the_rest_arrives(
    pipeline: Pipeline,
    database: Database,
    database_url: str,
    owner: asyncpg.Connection,
    tmp_path: Path,
) -> None:
    """A retrieval naming an id the tenant never recorded cannot be stored; nobody is left to
    raise to, so it (and the answer built on it) goes to the rejected file."""
    key = await ingest_key(database)
    settings = Settings(data_dir=tmp_path)
    with live_server.serve(keyed_app(database_url)) as url:
        lineage = SyncLineage(url, api_key=key, settings=settings)
        try:
            answers = await asyncio.to_thread(pipeline, lineage, True)
        finally:
            await asyncio.to_thread(lineage.close)
    spool = SpoolFile(spool_dir(settings), DEFAULT_TENANT)
    rejected = spool.rejected_path.read_text()
    assert len(answers) == len(QUESTIONS) and all(answer in rejected for answer in answers)
    assert "unknown_parent" in rejected
    assert spool.status().records == 0
    kinds = await owner.fetch("SELECT DISTINCT kind FROM provenance")
    assert {row["kind"] for row in kinds} == {"document", "chunk"}


@pytest.mark.parametrize("outage", [False, True], ids=["service up", "service down, then up"])
async def test_a_refused_record_takes_no_record_of_another_call_with_it(
    outage: bool, database: Database, database_url: str, owner: asyncpg.Connection, tmp_path: Path
) -> None:
    """Calls queued while a large batch is out go together in the next request (or together
    to the spool): the one the service refuses must not take the others with it."""
    key = await ingest_key(database)
    settings = Settings(data_dir=tmp_path)
    listening = live_server.bound_socket()
    lineage = SyncLineage(live_server.url_of(listening), api_key=key, settings=settings)
    large = [
        Derivation([], f"document {n}", "document", source_uri=f"s3://bulk/{n}")
        for n in range(3000)
    ]
    try:
        with contextlib.ExitStack() as service:
            if not outage:
                service.enter_context(live_server.serve(keyed_app(database_url), listening))

            def record() -> list[Context]:
                lineage.derive_many(large)  # out, or being spooled, while the next three queue
                doc = lineage.derive([], "doc", "document", source_uri="s3://doc")
                orphan = lineage.derive([NEVER_RECORDED], "orphan", "chunk")
                return [doc, orphan, lineage.derive([doc], "sibling", "chunk")]

            doc, orphan, sibling = await asyncio.to_thread(record)
            if outage:
                service.enter_context(live_server.serve(keyed_app(database_url), listening))
            replay = await asyncio.to_thread(lineage.flush)
    finally:
        await asyncio.to_thread(lineage.close)
    assert replay.remaining == 0
    wanted = [doc.context_id, orphan.context_id, sibling.context_id]
    stored = await owner.fetch(
        "SELECT context_id FROM provenance WHERE context_id = ANY($1)", wanted
    )
    assert {row["context_id"] for row in stored} == {doc.context_id, sibling.context_id}
    assert await owner.fetchval("SELECT count(*) FROM provenance") == len(large) + 2
    [rejected] = (
        SpoolFile(spool_dir(settings), DEFAULT_TENANT).rejected_path.read_text().splitlines()
    )
    assert [r["context_id"] for r in json.loads(rejected)["records"]] == [orphan.context_id]


async def test_runs_of_a_langchain_batch_record_from_their_threads_at_once(
    database: Database, database_url: str, owner: asyncpg.Connection, tmp_path: Path
) -> None:
    """chain.batch() runs each input, and its callbacks, in a thread of its own."""
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.retrievers import BaseRetriever

    from lineage.integrations.langchain import LineageCallbackHandler

    class OneChunk(BaseRetriever):
        chunk: Document

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [self.chunk]

    def ask_each(lineage: SyncLineage, questions: list[str]) -> list[str]:
        doc = lineage.derive([], "doc", "document", source_uri="s3://doc")
        chunk = lineage.derive([doc], "chunk", "chunk")
        retriever = OneChunk(chunk=Document("chunk", metadata={"context_id": chunk.context_id}))
        chain = retriever | (lambda found: found[0].page_content) | FakeListChatModel(
            responses=["ok"])  # fmt: skip
        handler = LineageCallbackHandler(lineage)
        chain.batch(questions, config={"callbacks": [handler]})
        return handler.answers

    key = await ingest_key(database)
    questions = [f"question {n}" for n in range(100)]
    with live_server.serve(keyed_app(database_url)) as url:
        lineage = SyncLineage(url, api_key=key, settings=Settings(data_dir=tmp_path))
        try:
            answers = await asyncio.to_thread(ask_each, lineage, questions)
        finally:
            await asyncio.to_thread(lineage.close)
    assert len(answers) == len(questions)
    stored = await owner.fetchval("SELECT count(*) FROM provenance WHERE kind = 'answer'")
    assert stored == len(questions)


def test_a_key_with_a_database_url_is_refused_naming_what_goes_with_it() -> None:
    with pytest.raises(BadParameter, match="api_key goes with the lineage service's URL"):
        SyncLineage("postgresql://app@db/lineage", api_key="lk_0000000000000000_x")


SCRIPT_WITHOUT_CLOSE = """
import sys
from pathlib import Path
from lineage.core.derive import Derivation
from lineage.settings import Settings
from lineage.store.sync import SyncLineage
url, key, data_dir = sys.argv[1:]
lineage = SyncLineage(url, api_key=key, settings=Settings(data_dir=Path(data_dir)))
doc = lineage.derive([], "doc", "document", source_uri="s3://script")
lineage.derive_many([Derivation([doc], f"chunk {n}", "chunk") for n in range(50)])
"""


async def test_a_script_that_never_closes_still_sends_what_it_queued(
    database: Database, database_url: str, owner: asyncpg.Connection, tmp_path: Path
) -> None:
    key = await ingest_key(database)
    with live_server.serve(keyed_app(database_url)) as url:
        finished = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", SCRIPT_WITHOUT_CLOSE, url, key, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert finished.returncode == 0, finished.stderr
    assert await owner.fetchval("SELECT count(*) FROM provenance") == 51
