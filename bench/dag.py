"""A synthetic RAG DAG shaped like production lineage.

Documents have 1-3 revisions; every revision is chunked by chunker@1.4, the newest one also by
chunker@2.0; each chunk has an embedding. Each answer comes from one pipeline run: a query, a
retrieval of 8 chunks under an index snapshot (the older half of the snapshots served
chunker@1.4 chunks of any revision, the newer half chunker@2.0 chunks of the newest revision),
two summaries of 2-3 of those chunks (sharing chunks: diamonds), two claims (sharing a summary:
diamonds) and the answer. Documents are picked with a Zipf-like popularity, so the hottest one
feeds a large share of the answers.

Rows come out in dependency order, in the column order of COLUMNS, ready for COPY; with each
row its root sources (source_uri -> depth), computed the way the service computes them.
"""

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from lineage.core.record import CANONICAL_FIELDS
from lineage.services.root_sources import Roots, carry

# The provenance table's columns are the canonical fields, in the same order.
COLUMNS = CANONICAL_FIELDS
# The side table root_sources (schemas before migration 0036; created_at since 0016).
ROOT_COLUMNS = ("tenant_id", "source_uri", "kind", "context_id", "depth", "created_at")
Row = tuple[Any, ...]

SIZES = {"100k": 100_000, "1M": 1_000_000, "10M": 10_000_000}
RECORDS_PER_DOCUMENT = 400  # documents = records / 400: about 9% of the records are the corpus
RECORDS_PER_ANSWER = 7  # query, retrieval, 2 summaries, 2 claims, answer
CHUNKS_PER_CHUNKING = 6
RETRIEVED = 8
SNAPSHOTS = 10
ZIPF_EXPONENT = 0.75
OLD_CHUNKER, NEW_CHUNKER = "chunker@1.4", "chunker@2.0"
TRANSFORM_VERSIONS = (OLD_CHUNKER, NEW_CHUNKER, "embedder@3.1", "retriever@1.2")
START = datetime(2026, 1, 1, tzinfo=UTC)
PERIOD = timedelta(days=90)


def parse_size(text: str) -> int:
    """'100k', '1M', '10M', or a plain number of records (at least 1000)."""
    if text in SIZES:
        return SIZES[text]
    try:
        records = int(text.replace("_", ""))
    except ValueError:
        raise ValueError(f"size {text!r}: use {', '.join(SIZES)} or a number of records") from None
    if records < 1000:
        raise ValueError(f"size {text!r}: at least 1000 records")
    return records


def snapshot_name(index: int) -> str:
    return f"idx_s{index:02d}"


@dataclass
class Picks:
    """What the scenarios start from, chosen while generating."""

    hottest_source_uri: str = ""
    typical_source_uris: list[str] = field(default_factory=list)
    answer_ids: list[str] = field(default_factory=list)
    snapshot: str = snapshot_name(SNAPSHOTS - 1)
    transform_version: str = OLD_CHUNKER
    answers: int = 0
    records: int = 0


@dataclass
class Document:
    source_uri: str
    revisions: list[str]  # root ids, oldest first
    old_chunks: list[str]  # chunker@1.4, every revision
    new_chunks: list[str]  # chunker@2.0, newest revision


class Generator:
    def __init__(
        self,
        records: int,
        tenant_id: str = "default",
        seed: int | str = 9,
        namespace: str = "corpus",
    ) -> None:
        self.tenant_id = tenant_id
        self.namespace = namespace
        self.random = random.Random(seed)
        self.documents = max(5, records // RECORDS_PER_DOCUMENT)
        corpus = self.documents * (13 * 2 + 12)  # about 2 revisions a document on average
        self.answers = max(10, (records - corpus) // RECORDS_PER_ANSWER)
        self.picks = Picks(answers=self.answers)
        self.chunk_roots: dict[str, Roots] = {}
        self.count = 0
        weights = [1 / (rank + 1) ** ZIPF_EXPONENT for rank in range(self.documents)]
        self.popularity = list(itertools.accumulate(weights))

    def new_id(self) -> str:
        return f"ctx_{self.random.getrandbits(128):032x}"

    def new_hash(self) -> str:
        return f"sha256:{self.random.getrandbits(256):064x}"

    def rows(self) -> Iterator[tuple[Row, Roots]]:
        """Every record once, parents first, with its root sources."""
        documents: list[Document] = []
        for rank in range(self.documents):
            document = Document(f"s3://{self.namespace}/doc-{rank:07d}.md", [], [], [])
            yield from self._document(document, rank)
            documents.append(document)
        self.picks.hottest_source_uri = documents[0].source_uri
        self.picks.typical_source_uris = [
            d.source_uri for d in self.random.sample(documents, min(200, len(documents)))
        ]
        sample_every = max(1, self.answers // 2000)
        for number in range(self.answers):
            yield from self._pipeline(documents, number, number % sample_every == 0)
        self.picks.records = self.count

    def _row(
        self,
        parents: list[str],
        kind: str,
        moment: datetime,
        *,
        source_uri: str | None = None,
        transform_version: str | None = None,
        produced_by: str | None = None,
        index_snapshot: str | None = None,
        trace_id: str | None = None,
        attributes: str = "{}",
    ) -> tuple[Row, str]:
        context_id = self.new_id()
        self.count += 1
        transform = transform_version.partition("@")[0] if transform_version else None
        row = (
            self.tenant_id,
            context_id,
            parents,
            kind,
            source_uri,
            self.new_hash(),
            transform,
            transform_version,
            produced_by,
            index_snapshot,
            trace_id,
            moment,
            attributes,
        )
        return row, context_id

    def _document(self, document: Document, rank: int) -> Iterator[tuple[Row, Roots]]:
        revisions = self.random.choices((1, 2, 3), weights=(35, 35, 30))[0]
        for revision in range(revisions):
            moment = START + timedelta(days=30 * revision, seconds=rank)
            row, root = self._row([], "document", moment, source_uri=document.source_uri)
            document.revisions.append(root)
            yield row, {document.source_uri: 0}
            yield from self._chunks(document, root, document.old_chunks, OLD_CHUNKER, 0, moment)
        yield from self._chunks(
            document, root, document.new_chunks, NEW_CHUNKER, SNAPSHOTS // 2, moment
        )

    def _chunks(
        self,
        document: Document,
        root: str,
        into: list[str],
        chunker: str,
        snapshot: int,
        moment: datetime,
    ) -> Iterator[tuple[Row, Roots]]:
        for number in range(CHUNKS_PER_CHUNKING):
            chunk, chunk_id = self._row(
                [root],
                "chunk",
                moment,
                transform_version=chunker,
                attributes=f'{{"offset": {number * 512}}}',
            )
            into.append(chunk_id)
            self.chunk_roots[chunk_id] = {document.source_uri: 1}
            yield chunk, {document.source_uri: 1}
            embedding, _ = self._row(
                [chunk_id],
                "embedding",
                moment,
                transform_version="embedder@3.1",
                index_snapshot=snapshot_name(snapshot),
            )
            yield embedding, {document.source_uri: 2}

    def _retrieve(self, documents: list[Document], newer_snapshot: bool) -> list[str]:
        chosen: set[str] = set()
        while len(chosen) < RETRIEVED:
            [document] = self.random.choices(documents, cum_weights=self.popularity)
            pool = document.new_chunks if newer_snapshot else document.old_chunks
            chosen.add(self.random.choice(pool))
        return sorted(chosen)

    def _pipeline(
        self, documents: list[Document], number: int, sampled: bool
    ) -> Iterator[tuple[Row, Roots]]:
        snapshot = number * SNAPSHOTS // self.answers
        moment = START + PERIOD * (number / self.answers)
        trace_id = f"{self.random.getrandbits(128):032x}"
        chunks = self._retrieve(documents, snapshot >= SNAPSHOTS // 2)
        chunk_roots = [self.chunk_roots[c] for c in chunks]
        agent = f"agent_s/summarise@v{6 + number % 2}"

        query_uri = f"query://{self.namespace}/{number}"
        query, query_id = self._row([], "query", moment, source_uri=query_uri, trace_id=trace_id)
        yield query, {query_uri: 0}
        retrieval, retrieval_id = self._row(
            [query_id, *chunks],
            "retrieval",
            moment,
            transform_version="retriever@1.2",
            index_snapshot=snapshot_name(snapshot),
            trace_id=trace_id,
            attributes=f'{{"top_k": {RETRIEVED}}}',
        )
        retrieval_roots = carry([{query_uri: 0}, *chunk_roots])
        yield retrieval, retrieval_roots
        # Two summaries over overlapping chunks of the retrieval: a diamond per shared chunk.
        first = self.random.sample(range(RETRIEVED), self.random.choice((2, 3)))
        second = [first[0], *self.random.sample(range(RETRIEVED), 2)]
        summaries: list[tuple[str, Roots]] = []
        for picked in (first, sorted(set(second))):
            summary, summary_id = self._row(
                [retrieval_id, *(chunks[i] for i in picked)],
                "summary",
                moment,
                produced_by=agent,
                trace_id=trace_id,
            )
            roots = carry([retrieval_roots, *(chunk_roots[i] for i in picked)])
            summaries.append((summary_id, roots))
            yield summary, roots
        # Two claims, the second resting on both summaries: a diamond on the first summary.
        claims: list[tuple[str, Roots]] = []
        for resting in (summaries[:1], summaries):
            claim, claim_id = self._row(
                [s for s, _ in resting],
                "claim",
                moment,
                produced_by="agent_a/answer@v3",
                trace_id=trace_id,
            )
            roots = carry([r for _, r in resting])
            claims.append((claim_id, roots))
            yield claim, roots
        answer, answer_id = self._row(
            [c for c, _ in claims],
            "answer",
            moment,
            produced_by="agent_a/answer@v3",
            trace_id=trace_id,
        )
        if sampled:
            self.picks.answer_ids.append(answer_id)
        yield answer, carry([r for _, r in claims])
