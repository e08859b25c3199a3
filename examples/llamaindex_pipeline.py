"""LlamaIndex with lineage and no OpenTelemetry: ingest two documents through an ingestion
pipeline (a sentence splitter wrapped by LineageTransformation), index them in memory with a mock
embedding, ask a question with a mock LLM (no network, no model), walk the answer back to its
documents, then revise a document and see the freshness check flag the answer. Needs
`pip install 'lineage[llamaindex]'`.

    python examples/llamaindex_pipeline.py     # LINEAGE_DATABASE_URL, else the embedded server
"""

import asyncio
from typing import Any

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index_instrumentation import get_dispatcher

from lineage import db
from lineage.db.database import Database
from lineage.db.migrate import migrate
from lineage.integrations.llamaindex import LineageEventHandler, LineageTransformation
from lineage.services import walks
from lineage.settings import Settings
from lineage.store.sync import SyncLineage

DOCUMENTS = {
    "kb/refunds.md": "Refunds are paid within 14 days. Refunds go back to the original card.",
    "kb/shipping.md": "Shipping is free over 50 euros. Parcels arrive in 3 working days.",
}
REVISED = "Refunds are paid within 30 days. Refunds go back to the original card."
QUESTION = "How many days until refunds are paid?"


async def walk_and_freshness(
    url: str, answer_id: str, settings: Settings
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    database = await Database.connect(settings, url, max_size=2)
    try:
        walk = await walks.walk_back(database, settings, "default", answer_id, None)
        stale = await walks.impact_nodes(
            database, settings, "stale", tenant_id="default", source_uri="any",
            kind="answer", max_depth=walks.check_depth(settings, None),
        )  # fmt: skip
        return walk.nodes, stale
    finally:
        await database.close()


def main() -> None:
    settings = Settings()
    url = db.database_url(settings)
    migrate(url)
    embedding = MockEmbedding(embed_dim=8)
    with SyncLineage(url) as lineage:
        documents = [Document(text=t, metadata={"file_path": u}) for u, t in DOCUMENTS.items()]
        splitter = SentenceSplitter(chunk_size=48, chunk_overlap=0)
        pipeline = IngestionPipeline(transformations=[LineageTransformation(lineage, splitter)])
        nodes = pipeline.run(documents=documents)
        print(f"ingested {len(documents)} documents into {len(nodes)} nodes")

        index = VectorStoreIndex(nodes, embed_model=embedding)
        handler = LineageEventHandler(lineage, index_snapshot=index.index_id, produced_by="mock")
        get_dispatcher().add_event_handler(handler)
        engine = index.as_query_engine(
            llm=MockLLM(max_tokens=8), embed_model=embedding, similarity_top_k=1
        )
        text = str(engine.query(QUESTION))
        [answer_id] = handler.answers
        print(f"question: {QUESTION}")
        print(f"answer {answer_id}: {text}")

        found, _ = asyncio.run(walk_and_freshness(url, answer_id, settings))
        print(f"walk-back of {answer_id}:")
        for node in found:
            where = f" {node['source_uri']}" if node["source_uri"] else ""
            print(f"  {'  ' * node['depth']}{node['kind']} {node['context_id']}{where}")

        for uri, original in DOCUMENTS.items():
            if uri in {node["source_uri"] for node in found}:
                revised = REVISED if uri == "kb/refunds.md" else original + " Revised."
                lineage.derive([], revised, "document", "llama_index_reader", "1",
                               source_uri=uri, deterministic=True)  # fmt: skip
                print(f"revised {uri}")
        _, stale = asyncio.run(walk_and_freshness(url, answer_id, settings))
        for node in stale:
            print(f"stale: {node['kind']} {node['context_id']}")


if __name__ == "__main__":
    main()
