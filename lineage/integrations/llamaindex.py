"""LlamaIndex without OpenTelemetry (`pip install 'lineage[llamaindex]'`), through derive():

    lineage = SyncLineage("http://lineage:8765", api_key=KEY)  # an ingest key; or a PostgreSQL URL
    pipeline = IngestionPipeline(transformations=[LineageTransformation(lineage, splitter)])
    nodes = pipeline.run(documents=documents)            # documents and chunks recorded
    index = VectorStoreIndex(nodes, embed_model=...)
    get_dispatcher().add_event_handler(LineageEventHandler(lineage, index_snapshot=index.index_id))
    index.as_query_engine(...).query(question)            # retrieval and answer recorded

- A document is a `document` record (source_uri: its `file_path`, else its doc id; a deterministic
  id, so re-ingesting the same text records nothing new). Its doc id is not kept otherwise:
  LlamaIndex draws a new one each time a file is loaded, and the same file indexed again must be
  the same record, its new chunks recorded under it. Each node the splitter makes is a `chunk`
  under its own node id, derived from its SOURCE relationship's document, with transform the
  splitter's class and transform_version `<class>@<llama-index-core version>`; the node's own hash
  (LlamaIndex's, over text and metadata) is kept as `attributes.node_hash`, while content_hash is
  the sha256 of the chunk's text, as for every record.
- A query (QueryEndEvent) becomes a `retrieval` (parents: its source nodes, with their scores, and
  the index snapshot) and an `answer` derived from it.

Degrade-open: a failure is logged and counted (`lineage_degraded_total{reason=
"framework_hook_failed"}`) and the query goes on; the transformation passes its nodes through.
Over HTTP the hooks only queue their records (lineage.store.background), and what the service
then refuses goes to the spool's rejected file.
"""

import json
import logging
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.query import QueryEndEvent
from llama_index.core.schema import BaseNode, NodeRelationship, TransformComponent
from pydantic import ConfigDict, PrivateAttr

from lineage.core import metrics
from lineage.core.derive import Derivation
from lineage.core.record import ID_PATTERN, new_context_id
from lineage.store.sync import SyncLineage

__all__ = ["LineageEventHandler", "LineageTransformation"]

log = logging.getLogger(__name__)
CORE_VERSION = metadata.version("llama-index-core")


class LineageTransformation(TransformComponent):
    """Runs `splitter` over the documents, recording documents and chunks as it goes."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    _lineage: SyncLineage = PrivateAttr()
    _splitter: Any = PrivateAttr()

    def __init__(self, lineage: SyncLineage, splitter: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lineage = lineage
        self._splitter = splitter

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[BaseNode]:
        split: list[BaseNode] = list(self._splitter(nodes, **kwargs))
        try:
            self._record(nodes, split)
        except Exception as exc:  # degrade-open: ingestion goes on without lineage
            log.warning("lineage could not record ingested nodes: %r", exc)
            metrics.count_degraded("framework_hook_failed")
        return split

    def _record(self, documents: Sequence[BaseNode], nodes: Sequence[BaseNode]) -> None:
        recorded = self._lineage.derive_many(
            [
                Derivation(
                    [],
                    document.get_content(),
                    "document",
                    "llama_index_reader",
                    "1",
                    source_uri=str(document.metadata.get("file_path") or document.node_id),
                    deterministic=True,
                )
                for document in documents
            ]
        )
        by_doc = {d.node_id: r.context_id for d, r in zip(documents, recorded, strict=True)}
        transform = type(self._splitter).__name__
        chunks = []
        for node in nodes:
            source = node.relationships.get(NodeRelationship.SOURCE)
            parent = by_doc.get(getattr(source, "node_id", ""))
            if parent is None or not ID_PATTERN.fullmatch(node.node_id):
                continue  # a node of no document given here, or an id we cannot keep
            chunks.append(
                Derivation(
                    [parent],
                    node.get_content(),
                    "chunk",
                    transform,
                    CORE_VERSION,
                    attributes={"node_hash": node.hash},
                    context_id=node.node_id,
                )
            )
        self._lineage.derive_many(chunks)


class LineageEventHandler(BaseEventHandler):
    """Records each finished query: a retrieval over its source nodes, and its answer."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    _lineage: SyncLineage = PrivateAttr()
    _index_snapshot: str | None = PrivateAttr(default=None)
    _produced_by: str | None = PrivateAttr(default=None)
    _answers: list[str] = PrivateAttr(default_factory=list)

    def __init__(
        self,
        lineage: SyncLineage,
        *,
        index_snapshot: str | None = None,
        produced_by: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._lineage = lineage
        self._index_snapshot = index_snapshot
        self._produced_by = produced_by

    @classmethod
    def class_name(cls) -> str:
        return "LineageEventHandler"

    @property
    def answers(self) -> list[str]:
        """The answers recorded, in order."""
        return self._answers

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if not isinstance(event, QueryEndEvent):
            return
        try:
            self._record(event)
        except Exception as exc:  # degrade-open: the query's answer goes out regardless
            log.warning("lineage could not record a query: %r", exc)
            metrics.count_degraded("framework_hook_failed")

    def _record(self, event: QueryEndEvent) -> None:
        response = event.response
        sources = [s for s in getattr(response, "source_nodes", []) or [] if s.node.node_id]
        chunks = list(dict.fromkeys(s.node.node_id for s in sources))
        if not chunks:
            return
        scores = {s.node.node_id: s.score for s in sources if s.score is not None}
        retrieval_id = new_context_id()
        _, answer = self._lineage.derive_many(
            [
                Derivation(
                    chunks,
                    json.dumps({"event": event.id_, "chunks": chunks}),
                    "retrieval",
                    "llama_index_retriever",
                    index_snapshot=self._index_snapshot,
                    attributes={"scores": scores},
                    context_id=retrieval_id,
                ),
                Derivation(
                    [retrieval_id],
                    str(getattr(response, "response", "") or ""),
                    "answer",
                    "llama_index_query_engine",
                    produced_by=self._produced_by,
                ),
            ]
        )
        self._answers.append(answer.context_id)
