"""A LlamaIndex RAG pipeline over pgvector or Qdrant, traced with OpenInference and exported
with the plain OpenTelemetry OTLP exporter: lineage learns the embedding model of every chunk,
the retrieval and the answer from the spans alone. Only the splitting goes through lineage's
LlamaIndex transformation, because no OpenInference span says which chunks a document was cut
into. The embedding and the LLM are deterministic fakes (no network, no model).

Each chunk's vector is stored under its LlamaIndex node id, which the transformation records as
the chunk's lineage context_id: pgvector's `node_id` column holds it as is; Qdrant takes only
UUIDs and integers as point ids and keeps node ids nowhere filterable, so each chunk also
carries it as the `context_id` metadata field (its payload field `context_id`). Register the
store with that column or field, and `lineage forget` deletes a document's vectors.

    pip install 'lineage[examples]'
    lineage serve &                                   # OTLP intake at /v1/traces
    export LINEAGE_URL=http://127.0.0.1:8765
    export LINEAGE_API_KEY=lk_…    # `lineage key create --tenant default --scope ingest`
    python examples/rag_vector_store.py pgvector postgresql://postgres@127.0.0.1:5433/rag
    python examples/rag_vector_store.py qdrant ./qdrant-data --embedding-model hash-embed-2

The pipeline holds an ingest key and no database credentials. It prints the trace id of the
question: `GET /v1/traces/<trace id>` lists its answer, whose header
(`GET /v1/contexts/<answer>/header`) nests the request, the LLM call (provider, model,
parameters) and the backend request under it (its response id). Then
`lineage impact --embedding-model hash-embed-1 --kind answer` lists the answers on the chunks that
model embedded, and, with the stores registered (docs/privacy.md, "Vector stores"),
`lineage forget --source-uri kb/refunds.md` deletes that document's vectors from both.
"""

import argparse
import hashlib
import math
import os
import re
from collections.abc import Sequence
from typing import Any

from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, TransformComponent
from llama_index.core.vector_stores.types import BasePydanticVectorStore
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

from lineage.integrations.llamaindex import LineageTransformation
from lineage.store.sync import SyncLineage

DOCUMENTS = {
    "kb/refunds.md": (
        "Refunds are paid within 14 days of the day the returned parcel reaches our warehouse, "
        "once the goods have been checked by the returns team and found complete and unused.\n\n"
        "Refunds go back to the original card or account used for the order; store credit is "
        "offered only when the original payment method has been closed in the meantime."
    ),
    "kb/shipping.md": (
        "Shipping is free for every order over 50 euros within the European Union, and costs a "
        "flat 4 euros 90 below that amount whatever the size or weight of the parcel.\n\n"
        "Parcels arrive in 3 working days in most countries; remote islands and mountain areas "
        "can take up to 7 working days because of the carriers' reduced collection schedules."
    ),
    "kb/returns.md": (
        "Returns are accepted for 30 days after delivery for any reason, provided the goods are "
        "unused and sent back in their original packaging with every accessory included.\n\n"
        "Return labels are printed at home from the order page; customers without a printer can "
        "show the label's QR code at any post office counter to have it printed there."
    ),
}
QUESTION = "When are refunds paid back to the card?"
# What the fake LLM says of itself, as a hosted model's client would.
PROVIDER, MODEL, MAX_TOKENS = "extractive", "extractive-1", 64
CLIENT_SDK, CLIENT_SDK_VERSION = "extractive-sdk", "1.0.0"
DIMENSIONS = 256
WORD = re.compile(r"[a-z]{4,}")  # words that carry meaning


class HashEmbedding(BaseEmbedding):
    """Set of words: each word's hash picks a dimension. The same text, the same vector."""

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * DIMENSIONS
        for word in set(WORD.findall(text.lower())):
            vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMENSIONS] = 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)


class ExtractiveLLM(CustomLLM):
    """Answers with the sentence of the context that shares most words with the question.

    It reports itself as a LlamaIndex LLM does: its LLMMetadata (model and limits) is what the
    OpenInference instrumentor records as the LLM span's `llm.model_name` and
    `llm.invocation_parameters`. Its fake backend call is wrapped in a CLIENT span as the
    OpenTelemetry GenAI client instrumentations (opentelemetry-instrumentation-openai-v2 and its
    kin) wrap an SDK's request: provider, request model and parameters, and the backend's
    response id (`gen_ai.response.id`)."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=MODEL, context_window=2048, num_output=MAX_TOKENS)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        tracer = trace.get_tracer(CLIENT_SDK, CLIENT_SDK_VERSION)
        with tracer.start_as_current_span(f"text_completion {MODEL}", kind=SpanKind.CLIENT) as call:
            call.set_attributes(
                {
                    "gen_ai.operation.name": "text_completion",
                    "gen_ai.provider.name": PROVIDER,
                    "gen_ai.request.model": MODEL,
                    "gen_ai.request.max_tokens": MAX_TOKENS,
                    "gen_ai.request.temperature": 0.0,
                }
            )
            context, _, question = prompt.partition("Query:")
            asked = set(WORD.findall(question.lower()))
            sentences = re.split(r"(?<=\.)\s+|\n+", context)
            best = max(
                sentences, key=lambda sentence: len(asked & set(WORD.findall(sentence.lower())))
            )
            response_id = "cmpl-" + hashlib.sha256(prompt.encode()).hexdigest()[:24]
            call.set_attributes({"gen_ai.response.id": response_id, "gen_ai.response.model": MODEL})
        return CompletionResponse(text=best.strip())

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        yield self.complete(prompt, formatted, **kwargs)


class KeepContextId(TransformComponent):
    """Copies each chunk's node id (its lineage context_id) into the metadata field `context_id`,
    left out of the text that is embedded and prompted."""

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        for node in nodes:
            node.metadata["context_id"] = node.node_id
            node.excluded_embed_metadata_keys.append("context_id")
            node.excluded_llm_metadata_keys.append("context_id")
        return nodes


def vector_store(kind: str, where: str) -> BasePydanticVectorStore:
    if kind == "pgvector":
        from llama_index.vector_stores.postgres import PGVectorStore

        url = where.split("://", 1)[1]
        return PGVectorStore.from_params(  # the table is data_chunks
            connection_string=f"postgresql+psycopg2://{url}",
            async_connection_string=f"postgresql+asyncpg://{url}",
            table_name="chunks",
            embed_dim=DIMENSIONS,
        )
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    return QdrantVectorStore(collection_name="chunks", client=QdrantClient(path=where))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", choices=["pgvector", "qdrant"])
    parser.add_argument("where", help="pgvector: a postgresql:// URL; qdrant: a folder")
    parser.add_argument("--embedding-model", default="hash-embed-1")
    parser.add_argument(
        "--lineage",
        default=os.environ.get("LINEAGE_URL", "http://127.0.0.1:8765"),
        help="the lineage service's URL (default $LINEAGE_URL); an ingest key in $LINEAGE_API_KEY",
    )
    args = parser.parse_args()
    key = os.environ.get("LINEAGE_API_KEY")  # an ingest key: it may append, nothing else

    provider = TracerProvider(resource=Resource.create({"service.name": "rag-example"}))
    exporter = OTLPSpanExporter(
        f"{args.lineage}/v1/traces", headers={"Authorization": f"Bearer {key}"} if key else None
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # what client libraries' spans go to
    LlamaIndexInstrumentor().instrument(tracer_provider=provider)

    store = vector_store(args.store, args.where)
    embedding = HashEmbedding(model_name=args.embedding_model)
    documents = [
        Document(  # a stable id: indexing again records no document twice
            id_=uri,
            text=text,
            metadata={"file_path": uri},
            excluded_embed_metadata_keys=["file_path"],  # what is embedded is the chunk
        )
        for uri, text in DOCUMENTS.items()
    ]
    with SyncLineage(args.lineage, api_key=key) as lineage:  # sent before the question
        splitter = SentenceSplitter(chunk_size=64, chunk_overlap=0)
        pipeline = IngestionPipeline(
            transformations=[LineageTransformation(lineage, splitter), KeepContextId()]
        )
        nodes = pipeline.run(documents=documents)
    storage = StorageContext.from_defaults(vector_store=store)
    index = VectorStoreIndex(nodes, storage_context=storage, embed_model=embedding)
    engine = index.as_query_engine(llm=ExtractiveLLM(), similarity_top_k=2)
    with trace.get_tracer("rag-example").start_as_current_span("question") as span:
        answer = engine.query(QUESTION)
        trace_id = format(span.get_span_context().trace_id, "032x")
    provider.shutdown()  # sends what is left
    print(f"indexed {len(nodes)} chunks into {args.store} with {args.embedding_model}")
    print(f"trace {trace_id}: {QUESTION} -> {answer}")


if __name__ == "__main__":
    main()
