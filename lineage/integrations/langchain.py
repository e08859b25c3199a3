"""LangChain without OpenTelemetry (`pip install 'lineage[langchain]'`): record documents and
chunks as you index them, and retrievals and answers from a callback handler, through derive().

    lineage = SyncLineage("http://lineage:8765", api_key=KEY)  # an ingest key; or a PostgreSQL URL
    chunks = index_documents(lineage, documents, splitter)     # Documents with context_id
    ...                                                      # put chunks in your vector store
    chain.invoke(question, config={"callbacks": [LineageCallbackHandler(lineage)]})

A retrieved Document names its chunk by `metadata["context_id"]` (index_documents() puts it
there; vector stores keep metadata), its score by `metadata["score"]` when the store gives one.
An answer's parents are the retrievals of the same run (the chain's root run). Degrade-open: a
hook that fails logs why, counts `lineage_degraded_total{reason="framework_hook_failed"}` and
lets the chain go on; over HTTP a hook only queues its records (lineage.store.background), and
what the service then refuses goes to the spool's rejected file.
"""

import json
import logging
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.outputs import LLMResult

from lineage.core import metrics
from lineage.core.derive import Derivation
from lineage.store.sync import SyncLineage

__all__ = ["LineageCallbackHandler", "index_documents"]

log = logging.getLogger(__name__)
CONTEXT_ID = "context_id"


def _version_of(thing: object) -> str:
    package = type(thing).__module__.split(".")[0]
    try:
        return metadata.version(package.replace("_", "-"))
    except metadata.PackageNotFoundError:
        return "0"


def index_documents(
    lineage: SyncLineage,
    documents: Sequence[Document],
    splitter: Any,
    *,
    loader: str = "langchain_loader",
) -> list[Document]:
    """Record each document (by `metadata["source"]`) and the chunks `splitter.split_text()`
    cuts from it (transform: the splitter's class @ its package's version). Returns the chunks as
    Documents whose metadata carries their `context_id`. Raises on bad input: indexing is where
    a mistake should be seen."""
    transform, version = type(splitter).__name__, _version_of(splitter)
    chunks: list[Document] = []
    for document in documents:
        source = str(document.metadata.get("source") or document.id or "")
        doc = lineage.derive(
            [], document.page_content, "document", loader, "1", source_uri=source or None,
            deterministic=True,
        )  # fmt: skip
        texts: list[str] = list(splitter.split_text(document.page_content))
        made = lineage.derive_many(
            [
                Derivation([doc], text, "chunk", transform, version, deterministic=True)
                for text in texts
            ]
        )
        chunks += [
            Document(page_content=c.text, metadata={**document.metadata, CONTEXT_ID: c.context_id})
            for c in made
        ]
    return chunks


def _degrade_open(hook: Callable[..., None]) -> Callable[..., None]:
    def guarded(self: "LineageCallbackHandler", *args: Any, **kwargs: Any) -> None:
        try:
            hook(self, *args, **kwargs)
        except Exception as exc:  # degrade-open: lineage never fails the chain
            log.warning("lineage %s hook failed: %r", hook.__name__, exc)
            metrics.count_degraded("framework_hook_failed")

    return guarded


class LineageCallbackHandler(BaseCallbackHandler):
    """Records a `retrieval` per retriever run (parents: the chunks it returned) and an
    `answer` per LLM run (parents: the retrievals of the same root run)."""

    raise_error = False

    def __init__(
        self,
        lineage: SyncLineage,
        *,
        index_snapshot: str | None = None,
        produced_by: str | None = None,
    ) -> None:
        self.lineage = lineage
        self.index_snapshot = index_snapshot
        self.produced_by = produced_by
        self._parents: dict[UUID, UUID | None] = {}
        self._retrievals: dict[UUID, list[str]] = {}
        self.answers: list[str] = []  # the answers recorded, in order

    def _root(self, run_id: UUID, parent_run_id: UUID | None) -> UUID:
        self._parents.setdefault(run_id, parent_run_id)
        root = run_id
        while (parent := self._parents.get(root)) is not None:
            root = parent
        return root

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        self._root(run_id, parent_run_id)

    @_degrade_open
    def on_retriever_end(
        self, documents: Sequence[Document], *, run_id: UUID, parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        root = self._root(run_id, parent_run_id)
        scores: dict[str, float] = {}
        chunks: list[str] = []
        for document in documents:
            context_id = document.metadata.get(CONTEXT_ID)
            if not isinstance(context_id, str) or context_id in chunks:
                continue
            chunks.append(context_id)
            score = document.metadata.get("score", document.metadata.get("relevance_score"))
            if isinstance(score, int | float):
                scores[context_id] = float(score)
        if not chunks:
            log.warning("lineage: a retriever returned no document with a context_id")
            metrics.count_degraded("framework_hook_failed")
            return
        retrieval = self.lineage.derive(
            chunks,
            json.dumps({"run_id": str(run_id), "chunks": chunks}),
            "retrieval",
            "langchain_retriever",
            index_snapshot=self.index_snapshot,
            attributes={"scores": scores, "run_id": str(run_id)},
        )
        self._retrievals.setdefault(root, []).append(retrieval.context_id)

    @_degrade_open
    def on_llm_end(
        self, response: LLMResult, *, run_id: UUID, parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        root = self._root(run_id, parent_run_id)
        parents = self._retrievals.get(root, [])
        if not parents:
            return  # an LLM call that used no retrieval of this run: nothing to derive it from
        text = "\n".join(g.text for generations in response.generations for g in generations)
        model = (response.llm_output or {}).get("model_name")
        answer = self.lineage.derive(
            parents,
            text,
            "answer",
            "langchain_llm",
            produced_by=self.produced_by or model,
            attributes={"run_id": str(run_id)},
        )
        self.answers.append(answer.context_id)
