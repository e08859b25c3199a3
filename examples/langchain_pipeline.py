"""LangChain with lineage and no OpenTelemetry: index two documents, ask a question through a
chain (a keyword retriever and langchain_core's fake chat model, so no network and no model),
walk the answer back to its documents, then revise a document and see the freshness check flag
the answer. Needs `pip install 'lineage[langchain]'`.

    python examples/langchain_pipeline.py      # LINEAGE_DATABASE_URL, else the embedded server
"""

import asyncio
import re

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough

from lineage import db
from lineage.db.database import Database
from lineage.db.migrate import migrate
from lineage.integrations.langchain import LineageCallbackHandler, index_documents
from lineage.services import walks
from lineage.settings import Settings
from lineage.store.sync import SyncLineage

DOCUMENTS = {
    "kb/refunds.md": "Refunds are paid within 14 days.\n\nRefunds go back to the original card.",
    "kb/shipping.md": "Shipping is free over 50 euros.\n\nParcels arrive in 3 working days.",
}
REVISED = "Refunds are paid within 30 days.\n\nRefunds go back to the original card."
QUESTION = "How many days until refunds are paid?"


class ParagraphSplitter:
    """Splits on blank lines: the text-splitter interface (`split_text`) in three lines."""

    def split_text(self, text: str) -> list[str]:
        return [part.strip() for part in text.split("\n\n") if part.strip()]


class KeywordRetriever(BaseRetriever):
    """The chunk sharing most words with the query, with its overlap as score."""

    chunks: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        words = set(re.findall(r"\w+", query.lower()))

        def overlap(chunk: Document) -> int:
            return len(words & set(re.findall(r"\w+", chunk.page_content.lower())))

        best = max(self.chunks, key=overlap)
        return [
            Document(
                page_content=best.page_content, metadata={**best.metadata, "score": overlap(best)}
            )
        ]


async def walk_and_freshness(url: str, answer_id: str, settings: Settings) -> tuple[list, list]:
    database = await Database.connect(settings, url, max_size=2)
    try:
        walk = await walks.walk_back(database, settings, "default", answer_id, None)
        stale = await walks.impact_nodes(
            database,
            settings,
            "stale",
            tenant_id="default",
            source_uri="any",
            kind="answer",
            max_depth=walks.check_depth(settings, None),
        )
        return walk.nodes, stale
    finally:
        await database.close()


def main() -> None:
    settings = Settings()
    url = db.database_url(settings)
    migrate(url)
    with SyncLineage(url) as lineage:
        documents = [Document(page_content=t, metadata={"source": u}) for u, t in DOCUMENTS.items()]
        chunks = index_documents(lineage, documents, ParagraphSplitter())
        print(f"indexed {len(documents)} documents into {len(chunks)} chunks")

        handler = LineageCallbackHandler(lineage, index_snapshot="kb@1", produced_by="fake-chat")
        prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
        chain = (
            {
                "context": KeywordRetriever(chunks=chunks)
                | (lambda found: "\n".join(d.page_content for d in found)),
                "question": RunnablePassthrough(),
            }
            | prompt
            | FakeListChatModel(responses=["Refunds are paid within 14 days."])
            | StrOutputParser()
        )
        text = chain.invoke(QUESTION, config={"callbacks": [handler]})
        [answer_id] = handler.answers
        print(f"question: {QUESTION}")
        print(f"answer {answer_id}: {text}")

        nodes, _ = asyncio.run(walk_and_freshness(url, answer_id, settings))
        print(f"walk-back of {answer_id}:")
        for node in nodes:
            print(
                f"  {'  ' * node['depth']}{node['kind']} {node['context_id']}"
                f"{' ' + node['source_uri'] if node['source_uri'] else ''}"
            )

        lineage.derive(
            [],
            REVISED,
            "document",
            "langchain_loader",
            "1",
            source_uri="kb/refunds.md",
            deterministic=True,
        )
        print("revised kb/refunds.md")
        _, stale = asyncio.run(walk_and_freshness(url, answer_id, settings))
        for node in stale:
            print(f"stale: {node['kind']} {node['context_id']}")


if __name__ == "__main__":
    main()
