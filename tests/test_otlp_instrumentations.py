"""The real OpenInference instrumentations, exporting through the real OTLP/HTTP exporter to a
real server: LangChain (a retriever and langchain_core's fake chat model) and LlamaIndex (an
in-memory index, mock embedding, mock LLM). No network, no model. The query pipelines hold no
lineage code: the walk-back comes from their spans alone."""

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

from lineage import derive
from lineage.api.app import create_app
from lineage.db.database import Database
from lineage.settings import Settings
from lineage.store import PostgresStore
from tests.live_server import serve

# The instrumentations touch deprecated APIs of the frameworks they wrap, and drop the span they
# were making when that warning is raised as an error (pytest's setting here).
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TEXTS = {
    "kb/refunds.md": "Refunds take 14 days. They are paid back to the card.",
    "kb/shipping.md": "Shipping is free for orders over 50 euros.",
}


@pytest.fixture
def server(database_url: str) -> Iterator[str]:
    with serve(create_app(Settings(auth="none"), database_url=database_url)) as url:
        yield url


@pytest.fixture
def provider(server: str, request: pytest.FixtureRequest) -> Iterator[TracerProvider]:
    """Exporting in batches, or each span as it ends (`indirect` parametrization)."""
    processor = getattr(request, "param", BatchSpanProcessor)
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "rag"}))
    exporter = OTLPSpanExporter(endpoint=f"{server}/v1/traces")
    tracer_provider.add_span_processor(processor(exporter))
    yield tracer_provider
    tracer_provider.shutdown()


async def walked_back_sources(server: str) -> tuple[list[dict[str, Any]], set[str]]:
    """Every answer recorded, and the source URIs the first one walks back to."""
    async with httpx.AsyncClient(base_url=server) as client:
        answers = (await client.get("/v1/contexts", params={"kind": "answer"})).json()["records"]
        assert answers, "no answer was derived from the spans"
        walk = await client.get(f"/v1/contexts/{answers[0]['context_id']}/lineage")
    nodes = walk.json()["nodes"]
    return answers, {n["source_uri"] for n in nodes if n["source_uri"]} | {n["kind"] for n in nodes}


async def test_langchain_retriever_and_fake_chat_model(
    server: str, provider: TracerProvider, database: Database
) -> None:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnablePassthrough
    from openinference.instrumentation.langchain import LangChainInstrumentor

    # Indexing, where the pipeline records its documents and chunks with derive().
    store = PostgresStore(database)
    for uri, text in TEXTS.items():
        doc = await derive(store, [], text, "document", "loader", "1", source_uri=uri)
        await derive(store, [doc], text, "chunk", "splitter", "1")

    class KnowledgeBase(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [Document(page_content=TEXTS["kb/refunds.md"], metadata={"source": "kb/r"})]

    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        prompt = ChatPromptTemplate.from_template("Context:\n{context}\nQuestion: {question}")
        chain = (
            {
                "context": KnowledgeBase() | (lambda ds: "\n".join(d.page_content for d in ds)),
                "question": RunnablePassthrough(),
            }
            | prompt
            | FakeListChatModel(responses=["Refunds take 14 days."])
            | StrOutputParser()
        )
        assert await asyncio.to_thread(chain.invoke, "How long do refunds take?")
        assert await asyncio.to_thread(provider.force_flush)
    finally:
        instrumentor.uninstrument()
    answers, reached = await walked_back_sources(server)
    assert len(answers) == 1
    assert {"answer", "prompt", "retrieval", "chunk", "document", "kb/refunds.md"} <= reached
    assert "kb/shipping.md" not in reached


@pytest.mark.parametrize(
    "provider", [BatchSpanProcessor, SimpleSpanProcessor], indirect=True, ids=["batch", "simple"]
)
async def test_llama_index_in_memory_index_mock_embedding_mock_llm(
    server: str, provider: TracerProvider, database: Database
) -> None:
    from llama_index.core import Document, Settings, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    documents = [Document(text=text, metadata={"file_path": uri}) for uri, text in TEXTS.items()]
    index = VectorStoreIndex.from_documents(documents, embed_model=MockEmbedding(embed_dim=8))
    # Indexing: each node is recorded under its own node id, derived from its document.
    store = PostgresStore(database)
    for node in index.docstore.docs.values():
        uri = node.metadata["file_path"]
        doc = await derive(
            store, [], TEXTS[uri], "document", "loader", "1", source_uri=uri, deterministic=True
        )
        await derive(
            store, [doc], node.get_content(), "chunk", "splitter", "1", context_id=node.node_id
        )

    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        engine = index.as_query_engine(
            llm=MockLLM(max_tokens=8), embed_model=MockEmbedding(embed_dim=8), similarity_top_k=1
        )
        Settings.embed_model = MockEmbedding(embed_dim=8)
        assert str(await asyncio.to_thread(engine.query, "How long do refunds take?"))
        assert await asyncio.to_thread(provider.force_flush)
    finally:
        instrumentor.uninstrument()
    answers, reached = await walked_back_sources(server)
    # The mock LLM's nested predict/complete is one generation, in one request or in two.
    assert len(answers) == 1
    assert {"answer", "prompt", "retrieval", "chunk", "document"} <= reached
    assert reached & set(TEXTS)
