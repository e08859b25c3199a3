"""The framework hooks without OpenTelemetry: the LangChain callback handler and the LlamaIndex
integration, through their examples (run as a user runs them) and degrade-open."""

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from prometheus_client import REGISTRY

from lineage import Context, Derivation, StoreUnavailable
from lineage.store.sync import SyncLineage

ROOT = Path(__file__).resolve().parents[1]
ANSWER = re.compile(r"^answer (ctx_[0-9a-f]{32}): ", re.MULTILINE)
# The frameworks touch deprecated APIs of their own; pytest would raise those in their hooks.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def run_example(name: str, database_url: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGE_")}
    finished = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        env=env | {"LINEAGE_DATABASE_URL": database_url},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    return finished.stdout


@pytest.mark.parametrize("example", ["langchain_pipeline.py", "llamaindex_pipeline.py"])
async def test_the_example_walks_its_answer_back_and_freshness_flags_it(
    example: str, database_url: str
) -> None:
    printed = await asyncio.to_thread(run_example, example, database_url)
    [answer_id] = ANSWER.findall(printed)
    walk = printed.split(f"walk-back of {answer_id}:")[1].split("revised")[0]
    kinds = [line.split()[0] for line in walk.strip().splitlines()]
    assert kinds == ["answer", "retrieval", "chunk", "document"]
    assert "kb/" in walk.strip().splitlines()[-1]
    assert f"stale: answer {answer_id}" in printed


def degraded() -> float:
    return (
        REGISTRY.get_sample_value("lineage_degraded_total", {"reason": "framework_hook_failed"})
        or 0.0
    )


class FailingLineage(SyncLineage):
    """Every derive() fails, as when the store rejects a record: the hooks must not pass it on."""

    def __init__(self) -> None:
        pass

    def derive(self, *args: Any, **kwargs: Any) -> Context:
        raise StoreUnavailable("lineage is down")

    def derive_many(self, items: list[Derivation]) -> list[Context]:
        raise StoreUnavailable("lineage is down")


def test_a_failing_langchain_hook_lets_the_chain_go_on(database_url: str) -> None:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.retrievers import BaseRetriever

    from lineage.integrations.langchain import LineageCallbackHandler

    class Fixed(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [Document(page_content="x", metadata={"context_id": "chunk_1"})]

    handler = LineageCallbackHandler(FailingLineage())
    before = degraded()
    chain = Fixed() | (lambda docs: docs[0].page_content) | FakeListChatModel(responses=["ok"])
    assert chain.invoke("q", config={"callbacks": [handler]}).content == "ok"
    assert degraded() == before + 1
    assert handler.answers == []


def test_a_failing_llama_index_hook_lets_ingestion_and_the_query_go_on(database_url: str) -> None:
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.llms import MockLLM
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index_instrumentation import get_dispatcher

    from lineage.integrations.llamaindex import LineageEventHandler, LineageTransformation

    lineage = FailingLineage()
    before = degraded()
    pipeline = IngestionPipeline(
        transformations=[
            LineageTransformation(lineage, SentenceSplitter(chunk_size=64, chunk_overlap=0))
        ]
    )
    nodes = pipeline.run(documents=[Document(text="Refunds take 14 days.")])
    assert len(nodes) == 1
    index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    handler = LineageEventHandler(lineage)
    dispatcher = get_dispatcher()
    dispatcher.add_event_handler(handler)
    try:
        engine = index.as_query_engine(
            llm=MockLLM(max_tokens=4), embed_model=MockEmbedding(embed_dim=8)
        )
        assert str(engine.query("how long?"))
    finally:
        dispatcher.event_handlers.remove(handler)
    assert degraded() == before + 2
    assert handler.answers == []


async def test_a_document_indexed_again_under_a_new_doc_id_keeps_each_runs_chunks(
    database_url: str, owner: asyncpg.Connection
) -> None:
    """LlamaIndex gives each loaded Document a random doc id: the same file loaded and indexed
    twice is the same document record, and both runs' chunks are recorded under it."""
    from llama_index.core import Document
    from llama_index.core.ingestion import IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter

    from lineage.integrations.llamaindex import LineageTransformation

    def index_twice() -> list[str]:
        chunk_ids = []
        with SyncLineage(database_url) as lineage:
            for _ in range(2):
                splitter = SentenceSplitter(chunk_size=64, chunk_overlap=0)
                pipeline = IngestionPipeline(
                    transformations=[LineageTransformation(lineage, splitter)]
                )
                loaded = Document(text="Refunds take 14 days.", metadata={"file_path": "kb/r.md"})
                chunk_ids += [node.node_id for node in pipeline.run(documents=[loaded])]
        return chunk_ids

    before = degraded()
    chunk_ids = await asyncio.to_thread(index_twice)
    assert degraded() == before
    [document] = await owner.fetch("SELECT context_id FROM provenance WHERE kind = 'document'")
    chunks = await owner.fetch("SELECT context_id, parent_ids FROM provenance WHERE kind = 'chunk'")
    assert sorted(row["context_id"] for row in chunks) == sorted(chunk_ids)
    assert len(chunk_ids) == 2
    assert all(row["parent_ids"] == [document["context_id"]] for row in chunks)
