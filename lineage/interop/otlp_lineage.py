"""Lineage from spans: what OpenInference and OpenTelemetry GenAI retrieval and LLM spans say
becomes records, through derive(). The mapping table is in docs/traces.md ("OTLP intake").

- A **retrieval span** (`openinference.span.kind = RETRIEVER` with `retrieval.documents.N.*`, or
  `gen_ai.operation.name = retrieval` with `gen_ai.retrieval.documents`) becomes a `retrieval`
  record whose parents are the records its documents are: a known context id (the document's
  id, or `context_id` in its metadata), else the newest record with the sha256 of its content
  (the chunk a pipeline recorded with derive()), else the newest record with the source URI its
  metadata names (`source`, `source_uri`, `file_path`, `url`). Its index_snapshot is
  `gen_ai.data_source.id`; its attributes keep each parent's score.
- An **embedding span** (OpenInference `EMBEDDING` with `embedding.embeddings.N.*`, or
  `gen_ai.operation.name = embeddings` with its texts in `gen_ai.input.messages`) that names its
  model becomes an `embedding` record per text, whose one parent is the chunk that text is (by
  sha256): produced_by the model, transform_version `embedding@<model>`, attributes.dimensions.
- An **LLM span** (OpenInference `LLM`, GenAI `chat`/`text_completion`/`generate_content`)
  becomes a `prompt` record (its input) and an `answer` record (its output). The prompt's
  parents are the ids of the `<context id="...">` blocks render_for_prompt() put in its input,
  else the retrieval records of the same trace whose spans ended before it began. An LLM span
  with an LLM child in the same request is the same generation and adds nothing.
- `ctx.consumed_ids` / `ctx.produced_ids` stay on the span as they are.

An id (or source, or content) that the tenant does not know is never made into a record: it is
listed on the span (`lineage.unknown_ids`), counted and reported. Record ids are made from the
trace and span ids (`otel:<trace>:<span>:<role>`), so a replayed export records nothing twice.
Texts (inputs, outputs, document contents, messages, embeddings) are hashed, never stored: the
stored span keeps their sha256 in their place.
"""

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from lineage.core.derive import Derivation
from lineage.core.record import ID_PATTERN
from lineage.db.database import Transaction
from lineage.interop.otlp_reading import MAX_LISTED, DocumentRef, SpanReading


@dataclass
class Resolved:
    """Which records the tenant has for the ids, hashes and sources the spans name."""

    ids: set[str]
    by_hash: dict[str, str]
    by_source: dict[str, str]

    def record_of(self, document: DocumentRef) -> str | None:
        if document.context_id in self.ids:
            return document.context_id
        if document.content_hash in self.by_hash:
            return self.by_hash[document.content_hash]
        return self.by_source.get(document.source_uri or "")


async def resolve(tx: Transaction, readings: Sequence[SpanReading]) -> Resolved:
    """Three lookups for the whole request, whatever its size."""
    documents = [d for r in readings for d in r.documents]
    ids = {d.context_id for d in documents if d.context_id}
    ids |= {i for r in readings for i in (*r.block_ids, *r.noted_ids) if ID_PATTERN.fullmatch(i)}
    # The records a replay of these spans would make again.
    ids |= {made for r in readings for made in r.record_ids()}
    rows = await tx.fetch("get_contexts", context_ids=list(ids))
    known = {row["context_id"] for row in rows}
    hashes = {d.content_hash for d in documents if d.content_hash and d.context_id not in known}
    by_hash = {
        row["content_hash"]: row["context_id"]
        for row in (
            await tx.fetch(
                "newest_by_content_hash",
                content_hashes=list(hashes),
            )
            if hashes
            else []
        )
    }
    sources = {
        d.source_uri
        for d in documents
        if d.source_uri and d.context_id not in known and d.content_hash not in by_hash
    }
    by_source = {
        row["source_uri"]: row["context_id"]
        for row in (
            await tx.fetch("newest_by_source_uri", source_uris=list(sources)) if sources else []
        )
    }
    return Resolved(known, by_hash, by_source)


@dataclass
class Mapped:
    """What a request's spans become: records to derive, and the ids no record stands for."""

    derivations: list[Derivation] = field(default_factory=list)
    unknown: dict[str, list[str]] = field(default_factory=dict)  # span_id -> what is unknown


def _micros(unix_nano: int) -> int:
    return unix_nano // 1000


def _nested_generations(readings: Iterable[SpanReading]) -> set[str]:
    """Span ids of LLM spans with an LLM child: the child is the generation itself."""
    llm = {(r.span.trace_id, r.span.span_id) for r in readings if r.role == "llm"}
    return {
        r.span.parent_span_id
        for r in readings
        if r.role == "llm"
        and (r.span.trace_id, r.span.parent_span_id) in llm
        and r.span.parent_span_id is not None
    }


def _embeddings(reading: SpanReading, resolved: Resolved, unknown: list[str]) -> list[Derivation]:
    """One embedding record per chunk the span embedded, its only parent that chunk: what the
    model (its maker, and its transform version `embedding@<model>`) made from it. Texts that
    are no chunk the tenant recorded go to `unknown`."""
    span, model = reading.span, reading.model
    identity = {"trace_id": span.trace_id, "span_id": span.span_id}
    made: list[Derivation] = []
    embedded: set[str] = set()
    for n, document in enumerate(reading.documents):
        chunk = resolved.record_of(document)
        if chunk is None:
            unknown.append(document.shown())
            continue
        record_id = reading.record_id(f"embedding.{n}")
        if chunk in embedded or record_id in resolved.ids:
            continue
        embedded.add(chunk)
        made.append(
            Derivation(
                [chunk],
                json.dumps({"chunk": chunk, "model": model, "span": identity}, sort_keys=True),
                "embedding",
                transform="embedding",
                version=model,
                produced_by=model,
                trace_id=span.trace_id,
                attributes={"otel": identity}
                | ({"dimensions": reading.dimensions} if reading.dimensions else {}),
                context_id=record_id,
            )
        )
    return made


def map_spans(
    readings: Sequence[SpanReading],
    resolved: Resolved,
    stored_retrievals: dict[str, list[tuple[str, int]]],
) -> Mapped:
    """Derivations for the spans not recorded before (a replay adds none).

    `stored_retrievals`: per trace id, retrieval records made from earlier requests, each with
    the end of its span (microseconds).
    """
    mapped = Mapped()
    retrievals: dict[str, list[tuple[str, int]]] = {
        trace: list(made) for trace, made in stored_retrievals.items()
    }
    for reading in readings:
        span = reading.span
        unknown = [i for i in reading.noted_ids if i not in resolved.ids]
        if reading.role == "retrieval":
            parents: dict[str, float | None] = {}
            for document in reading.documents:
                found = resolved.record_of(document)
                if found is None:
                    unknown.append(document.shown())
                else:
                    parents.setdefault(found, document.score)
            record_id = reading.record_id("retrieval")
            if parents and record_id not in resolved.ids:
                scores = {k: v for k, v in list(parents.items())[:MAX_LISTED] if v is not None}
                identity = {"trace_id": span.trace_id, "span_id": span.span_id}
                mapped.derivations.append(
                    Derivation(
                        list(parents),
                        json.dumps(identity | {"documents": list(parents)}, sort_keys=True),
                        "retrieval",
                        transform=span.name[:200],
                        index_snapshot=reading.index_snapshot,
                        trace_id=span.trace_id,
                        attributes={
                            "otel": identity | {"end_us": _micros(span.end_time_unix_nano)},
                            "scores": scores,
                        }
                        | ({"unknown_ids": unknown[:MAX_LISTED]} if unknown else {}),
                        context_id=record_id,
                    )
                )
            if parents:
                retrievals.setdefault(span.trace_id, []).append(
                    (record_id, _micros(span.end_time_unix_nano))
                )
        elif reading.role == "embedding":
            mapped.derivations += _embeddings(reading, resolved, unknown)
        if unknown:
            mapped.unknown[span.span_id] = unknown[:MAX_LISTED]
    nested = _nested_generations(readings)
    for reading in readings:
        if reading.role != "llm" or reading.span.span_id in nested:
            continue
        span = reading.span
        known_blocks = [i for i in reading.block_ids if i in resolved.ids]
        unknown_blocks = [i for i in reading.block_ids if i not in resolved.ids]
        if unknown_blocks:
            listed = mapped.unknown.setdefault(span.span_id, [])
            listed += unknown_blocks[: MAX_LISTED - len(listed)]
        started = _micros(span.start_time_unix_nano)
        prompt_parents = known_blocks or list(
            dict.fromkeys(
                made for made, ended in retrievals.get(span.trace_id, []) if ended <= started
            )
        )
        prompt_id, answer_id = reading.record_id("prompt"), reading.record_id("answer")
        if not prompt_parents or prompt_id in resolved.ids:
            continue
        identity = {"trace_id": span.trace_id, "span_id": span.span_id}
        mapped.derivations.append(
            Derivation(
                prompt_parents,
                reading.input_text,
                "prompt",
                trace_id=span.trace_id,
                attributes={"otel": identity}
                | ({"unknown_ids": unknown_blocks[:MAX_LISTED]} if unknown_blocks else {}),
                context_id=prompt_id,
            )
        )
        if not reading.output_text:
            continue
        mapped.derivations.append(
            Derivation(
                [prompt_id],
                reading.output_text,
                "answer",
                produced_by=reading.model,
                trace_id=span.trace_id,
                attributes={"otel": identity} | ({"model": reading.model} if reading.model else {}),
                context_id=answer_id,
            )
        )
    return mapped
