"""A worked example: a small policy question-answering pipeline, every step recorded through
derive(), then the answer walked back to the documents behind it.

Two policy documents are loaded, chunked, embedded, retrieved for a question, summarised and
answered with claims; the claims are verified and the answer is walked back. The embedder and
the model are deterministic fakes (a few lines each, no network), so every run prints the same
pipeline. Documents, chunks and embeddings get deterministic ids: a second run records them
nothing twice, and records only the new question and what follows from it.

    python examples/policy_pipeline.py      # LINEAGE_DATABASE_URL, else the embedded server
"""

import asyncio
import contextlib
import hashlib
import json
import math
import re
from collections.abc import Iterator
from typing import Any

import asyncpg

from lineage import db
from lineage.claims.answers import record_answer, record_prompt
from lineage.claims.judges import OfflineJudge
from lineage.claims.verify import mapping_resolver, verify_claims
from lineage.core import telemetry
from lineage.core.derive import Context, derive
from lineage.db.database import Database
from lineage.db.migrate import migrate
from lineage.interop.headers import front_matter, provenance_header
from lineage.services import walks
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore

TENANT = "default"
POLICIES = {
    "s3://policies/employee-leave.md": (
        "Employee leave policy.\n\n"
        "Employees receive 30 days' written notice before termination.\n\n"
        "Employees accrue 25 days of annual leave."
    ),
    "s3://policies/contractors.md": (
        "Contractor policy.\n\n"
        "Contractors receive 14 days' written notice before termination.\n\n"
        "Contractors are paid within 30 days of an approved invoice."
    ),
}
QUESTION = "How much notice do contractors get, compared with employees?"
INDEX_SNAPSHOT = "idx_example_1"
DIMENSIONS = 64
TOP_K = 2
MODEL = "fake-model-1"
WORD = re.compile(r"[a-z0-9]+")
STOP_WORDS = frozenset({"how", "much", "do", "get", "with", "the", "of", "a", "before"})

try:  # with the otel extra, answering the question is traced: one span per step
    from opentelemetry import trace

    TRACER: Any = trace.get_tracer("examples.policy_pipeline")
except ImportError:
    TRACER = None


@contextlib.contextmanager
def step(tracer: Any, name: str) -> Iterator[None]:
    """A span named `name` when tracing, else nothing."""
    if tracer is None:
        yield
        return
    with tracer.start_as_current_span(name):
        yield


def words(text: str) -> set[str]:
    """Lower-case words, a plural 's' dropped, stop words left out."""
    return {w.removesuffix("s") for w in WORD.findall(text.lower())} - STOP_WORDS


def fake_embedding(text: str) -> list[float]:
    """Hashed bag of words, unit length: similar words, similar vectors, no model."""
    vector = [0.0] * DIMENSIONS
    for word in words(text):
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMENSIONS] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [round(x / norm, 6) for x in vector]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def fake_summary(question: str, chunks: list[Context]) -> str:
    """The retrieved sentences that share a word with the question, in order."""
    return " ".join(c.text for c in chunks if words(c.text) & words(question))


def fake_answer(question: str, chunks: list[Context]) -> dict[str, Any]:
    """One cited sentence per chunk that answers the question, and a hedge without a source."""
    cited = [
        f"{c.text.removesuffix('.')} [{c.context_id}]."
        for c in chunks
        if len(words(c.text) & words(question)) >= 2
    ]
    return {"text": " ".join([*cited, "Check your contract for exceptions."])}


async def run_pipeline(store: PostgresStore, tracer: Any = TRACER) -> dict[str, Any]:
    """Every step, recorded; returns what the printout needs. Loading is not traced: its
    records are the same on every run, whatever trace asks the question."""
    chunks: list[Context] = []
    embeddings: dict[str, tuple[Context, list[float]]] = {}
    for uri, text in POLICIES.items():
        document = await derive(
            store, [], text, "document", "loader", "1.0", source_uri=uri, deterministic=True
        )
        start = 0
        for paragraph in text.split("\n\n"):
            start = text.index(paragraph, start)
            chunk = await derive(
                store,
                [document],
                paragraph,
                "chunk",
                "chunker",
                "1.0",
                index_snapshot=INDEX_SNAPSHOT,
                attributes={"char_start": start, "char_end": start + len(paragraph)},
                deterministic=True,
            )
            vector = fake_embedding(paragraph)
            embedding = await derive(
                store,
                [chunk],
                json.dumps(vector),
                "embedding",
                "fake-embedder",
                "1",
                index_snapshot=INDEX_SNAPSHOT,
                attributes={"dimensions": DIMENSIONS},
                deterministic=True,
            )
            chunks.append(chunk)
            embeddings[chunk.context_id] = (embedding, vector)

    with step(tracer, "answer the question"):
        return await ask(store, chunks, embeddings, tracer)


async def ask(
    store: PostgresStore,
    chunks: list[Context],
    embeddings: dict[str, tuple[Context, list[float]]],
    tracer: Any,
) -> dict[str, Any]:
    """The question, its retrieval, summary, prompt and answer, under one trace id (the
    current span's when tracing)."""
    trace_id = telemetry.current_trace_id() or telemetry.new_trace_id()
    with step(tracer, "embed the question"):
        query = await derive(
            store, [], QUESTION, "query", source_uri="chat://example/session", trace_id=trace_id
        )
        asked = fake_embedding(QUESTION)
    with step(tracer, "retrieve"):
        scored = sorted(chunks, key=lambda c: -cosine(asked, embeddings[c.context_id][1]))
        scored = scored[:TOP_K]
        scores = [round(cosine(asked, embeddings[c.context_id][1]), 3) for c in scored]
        retrieval = await derive(
            store,
            [query, *(embeddings[c.context_id][0] for c in scored)],
            "\n".join(c.context_id for c in scored),
            "retrieval",
            "retriever",
            "1.0",
            index_snapshot=INDEX_SNAPSHOT,
            trace_id=trace_id,
            attributes={"top_k": TOP_K, "scores": scores},
        )
    with step(tracer, "summarise"):
        summary = await derive(
            store,
            [retrieval],
            fake_summary(QUESTION, scored),
            "summary",
            "summarise",
            "1",
            produced_by="summariser/summarise@v1",
            trace_id=trace_id,
            attributes={"model": MODEL, "provider": "example"},
        )
    shown = [summary, *scored]
    with step(tracer, "answer"):
        prompt = await record_prompt(
            store, shown, produced_by="answerer/answer@v1", trace_id=trace_id
        )
        recorded = await record_answer(
            store,
            prompt.context_id,
            fake_answer(QUESTION, scored),
            produced_by="answerer/answer@v1",
            model=MODEL,
            trace_id=trace_id,
        )
    return {
        "chunks": chunks,
        "scored": list(zip(scored, scores, strict=True)),
        "texts": {c.context_id: c.text for c in shown},
        "recorded": recorded,
    }


def print_walk(walk: walks.Walk) -> None:
    """The answer first, each record's parents indented below it; a repeat is only named."""
    by_id = {node["context_id"]: node for node in walk.nodes}
    shown: set[str] = set()

    def show(context_id: str, indent: int) -> None:
        node = by_id[context_id]
        made_by = " ".join(
            part
            for part in (node["produced_by"] or node["transform_version"], node["source_uri"])
            if part
        )
        if context_id in shown:
            print(f"{'  ' * indent}{node['kind']} {context_id} (shown above)")
            return
        shown.add(context_id)
        print(f"{'  ' * indent}{node['kind']} {context_id} {made_by}".rstrip())
        for parent_id in node["parent_ids"]:
            if parent_id in by_id:
                show(parent_id, indent + 1)

    show(walk.nodes[0]["context_id"], 0)


async def main(pool: asyncpg.Pool, settings: Settings) -> None:
    database = Database(pool, settings)
    store = PostgresStore(database, TENANT)
    result = await run_pipeline(store)
    recorded = result["recorded"]
    answer = recorded.answer
    print(f"loaded {len(POLICIES)} documents into {len(result['chunks'])} chunks")
    print(f"question: {QUESTION}")
    for chunk, score in result["scored"]:
        print(f"retrieved {chunk.context_id} (score {score}): {chunk.text}")
    print(f"answer {answer.context_id}: {answer.text}")

    verification = await verify_claims(
        database,
        TENANT,
        answer.context_id,
        OfflineJudge(),
        mapping_resolver(result["texts"]),
        claim_texts={claim.claim_id: claim.text for claim in recorded.claims},
    )
    for line in verification.lines():
        print(line)

    walk = await walks.walk_back(database, settings, TENANT, answer.context_id, None)
    print(f"\nwalk-back of {answer.context_id} ({len(walk.nodes)} records):")
    print_walk(walk)

    header = await provenance_header(database, TENANT, answer.context_id)
    print("\nprovenance header for a file holding the answer:")
    print(front_matter(header), end="")


async def run(url: str, settings: Settings) -> None:
    pool = await db.create_pool(url, max_size=2)
    try:
        await main(pool, settings)
    finally:
        await pool.close()


if __name__ == "__main__":
    settings = Settings()
    url = db.database_url(settings)
    migrate(url)
    asyncio.run(run(url, settings))
