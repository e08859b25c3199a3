"""Lineage from spans: what OpenInference and OpenTelemetry GenAI spans say (as
lineage.interop.otlp_reading reads them) becomes records, through derive(). The mapping table,
span by span, is in docs/traces.md ("OTLP intake").

- A **retrieval** becomes a `retrieval` record whose parents are the records its documents are:
  a known context id, else the newest record with the sha256 of its content, else the newest
  record with the source URI its metadata names; `gen_ai.data_source.id` is its source_uri. A
  **rerank** is the same over what the reranker kept, naming what it dropped.
- An **embedding span** that names its model becomes an `embedding` record per text, its one
  parent the chunk that text is: produced_by the model, transform_version `embedding@<model>`.
- An **LLM span** becomes a `prompt` and an `answer`: the prompt derives from its context
  blocks, else the trace's reranks or retrievals that ended before it began, else (when those
  named only what the tenant never recorded) a `query` root of its input. Nested LLM spans are
  one generation, whichever request brought each.
- A GenAI **tool execution** becomes a root `tool_call`; an **agent invocation** a `reasoning`
  step over the records made from the spans below it.

An id (or source, or content) that the tenant does not know is never made into a record: it is
listed on the span (`lineage.unknown_ids`), counted and reported. Record ids are made from the
trace and span ids (`otel:<trace>:<span>:<role>`), so a replayed export records nothing twice.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from lineage.core.derive import Derivation
from lineage.core.hashing import content_hash
from lineage.core.record import ID_PATTERN, MAX_PARENTS, SESSION_ID
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


@dataclass(frozen=True)
class Made:
    """A record made from a span: what later spans of its trace may derive from."""

    context_id: str
    kind: str
    trace_id: str
    span_id: str
    end_us: int | None


@dataclass
class Earlier:
    """What earlier requests brought of the traces this request continues: their spans (as
    stored: texts hashed) and the records made from them."""

    spans: list[SpanReading] = field(default_factory=list)
    records: list[Made] = field(default_factory=list)


def _identity(reading: SpanReading) -> dict[str, str]:
    return {"trace_id": reading.span.trace_id, "span_id": reading.span.span_id}


def _made(reading: SpanReading, context_id: str, kind: str) -> Made:
    span = reading.span
    return Made(context_id, kind, span.trace_id, span.span_id, _micros(span.end_time_unix_nano))


def _one_generation(readings: Sequence[SpanReading], earlier: Earlier) -> set[str]:
    """Span ids of the LLM spans that add nothing: one with an LLM child (the child is the
    generation itself: LlamaIndex's predict around complete), in this request or an earlier
    one, and one whose LLM parent came in an earlier request (and was recorded then)."""
    llm = [r.span for r in (*readings, *earlier.spans) if r.role == "llm"]
    parents = {(s.trace_id, s.parent_span_id) for s in llm if s.parent_span_id}
    before = {(r.span.trace_id, r.span.span_id) for r in earlier.spans if r.role == "llm"}
    return {
        r.span.span_id
        for r in readings
        if r.role == "llm"
        and (
            (r.span.trace_id, r.span.span_id) in parents
            or (r.span.trace_id, r.span.parent_span_id) in before
        )
    }


def _retrieval(reading: SpanReading, resolved: Resolved, unknown: list[str]) -> Derivation | None:
    """A retrieval (its documents as parents) or a rerank (what it kept as parents, what it
    dropped named); None when nothing it names is known."""
    span = reading.span
    parents: dict[str, float | None] = {}
    for document in reading.documents:
        found = resolved.record_of(document)
        if found is None:
            unknown.append(document.shown())
        else:
            parents.setdefault(found, document.score)
    if not parents:
        return None
    scores = {k: v for k, v in list(parents.items())[:MAX_LISTED] if v is not None}
    identity = _identity(reading)
    attributes: dict[str, Any] = {"otel": identity | {"end_us": _micros(span.end_time_unix_nano)}}
    attributes |= {"scores": scores} | ({"unknown_ids": unknown[:MAX_LISTED]} if unknown else {})
    if reading.role == "rerank":
        given = dict.fromkeys(resolved.record_of(d) or d.shown() for d in reading.inputs)
        attributes["dropped"] = [i for i in given if i not in parents][:MAX_LISTED]
        if reading.top_k is not None:
            attributes["top_k"] = reading.top_k
    return Derivation(
        list(parents),
        json.dumps(identity | {"documents": list(parents)}, sort_keys=True),
        str(reading.role),
        transform=span.name[:200],
        produced_by=reading.model,
        index_snapshot=reading.index_snapshot,
        source_uri=reading.data_source,
        trace_id=span.trace_id,
        attributes=attributes,
        context_id=reading.record_id(str(reading.role)),
    )


def _tool_call(reading: SpanReading) -> Derivation:
    """A GenAI tool execution as the tool_call lineage.services.sessions records: a root from
    `tool://<tool>`, `enhanced` when both its arguments and result were on the span."""
    tool = reading.name or "tool"
    details: dict[str, Any] = {"tool": tool, "otel": _identity(reading)}
    if reading.input_hash:
        details["input_hash"] = reading.input_hash
    if reading.output_text or reading.input_hash is None:
        details["output_hash"] = content_hash(reading.output_text)
    details["detail"] = (
        "enhanced" if len(details.keys() & {"input_hash", "output_hash"}) == 2 else "basic"
    )
    if reading.session_id:
        details[SESSION_ID] = reading.session_id
    return Derivation(
        [],
        reading.output_text,
        "tool_call",
        transform=tool,
        source_uri=f"tool://{quote(tool, safe='')}",
        trace_id=reading.span.trace_id,
        attributes=details,
        context_id=reading.record_id("tool_call"),
    )


def _below(span_id: str, trace_id: str, ancestor: str, tree: dict[tuple[str, str], str]) -> bool:
    """Whether the span lies below `ancestor` in its trace's span tree."""
    seen: set[str] = set()
    current = tree.get((trace_id, span_id))
    while current is not None and current not in seen:
        if current == ancestor:
            return True
        seen.add(current)
        current = tree.get((trace_id, current))
    return False


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


def map_spans(readings: Sequence[SpanReading], resolved: Resolved, earlier: Earlier) -> Mapped:
    """Derivations for the spans not recorded before (a replay adds none)."""
    mapped = Mapped()
    made = list(earlier.records)
    # Retrievals and reranks that found nothing known: (trace, end, what they named).
    unresolved = [
        (r.span.trace_id, _micros(r.span.end_time_unix_nano), r.listed_unknown)
        for r in earlier.spans
        if r.role in ("retrieval", "rerank")
        and r.listed_unknown
        and not any(m.span_id == r.span.span_id for m in earlier.records)
    ]
    for reading in readings:
        span = reading.span
        unknown = [i for i in reading.noted_ids if i not in resolved.ids]
        if reading.role in ("retrieval", "rerank"):
            derivation = _retrieval(reading, resolved, unknown)
            if derivation is None:
                unresolved.append((span.trace_id, _micros(span.end_time_unix_nano), unknown))
            else:
                made.append(_made(reading, str(derivation.context_id), derivation.kind))
                if derivation.context_id not in resolved.ids:
                    mapped.derivations.append(derivation)
        elif reading.role == "embedding":
            mapped.derivations += _embeddings(reading, resolved, unknown)
        elif reading.role == "tool":
            tool_call = _tool_call(reading)
            made.append(_made(reading, str(tool_call.context_id), "tool_call"))
            if tool_call.context_id not in resolved.ids:
                mapped.derivations.append(tool_call)
        if unknown:
            mapped.unknown[span.span_id] = unknown[:MAX_LISTED]
    skipped = _one_generation(readings, earlier)
    for reading in readings:
        if reading.role == "llm" and reading.span.span_id not in skipped:
            made += _generation(reading, resolved, made, unresolved, mapped)
    tree = {
        (r.span.trace_id, r.span.span_id): r.span.parent_span_id
        for r in (*earlier.spans, *readings)
        if r.span.parent_span_id
    }
    for reading in readings:
        if reading.role != "agent" or reading.record_id("reasoning") in resolved.ids:
            continue
        span = reading.span
        steps = [
            m.context_id
            for m in made
            if m.trace_id == span.trace_id and _below(m.span_id, m.trace_id, span.span_id, tree)
        ]
        if steps:
            mapped.derivations.append(_reasoning(reading, list(dict.fromkeys(steps))))
    return mapped


def _reasoning(reading: SpanReading, steps: list[str]) -> Derivation:
    """A GenAI agent invocation: a reasoning step over what the spans below it recorded."""
    attributes: dict[str, Any] = {"otel": _identity(reading)}
    attributes |= {"agent": reading.name} if reading.name else {}
    attributes |= {SESSION_ID: reading.session_id} if reading.session_id else {}
    return Derivation(
        steps[:MAX_PARENTS],
        reading.output_text,
        "reasoning",
        produced_by=reading.model,
        trace_id=reading.span.trace_id,
        attributes=attributes,
        context_id=reading.record_id("reasoning"),
    )


def _generation(
    reading: SpanReading,
    resolved: Resolved,
    made: list[Made],
    unresolved: list[tuple[str, int, list[str]]],
    mapped: Mapped,
) -> list[Made]:
    """An LLM span's prompt and answer. The prompt derives from the context blocks in its
    input, else from the reranks (else the retrievals) of its trace that ended before it
    began; when none of those is known but some were named, from a query root of its input,
    the names kept on the prompt."""
    span = reading.span
    known_blocks = [i for i in reading.block_ids if i in resolved.ids]
    unknown_blocks = [i for i in reading.block_ids if i not in resolved.ids]
    if unknown_blocks:
        listed = mapped.unknown.setdefault(span.span_id, [])
        listed += unknown_blocks[: MAX_LISTED - len(listed)]
    started = _micros(span.start_time_unix_nano)
    before = [
        m
        for m in made
        if m.trace_id == span.trace_id
        and m.kind in ("retrieval", "rerank")
        and m.end_us is not None
        and m.end_us <= started
    ]
    reranked = [m for m in before if m.kind == "rerank"]
    prompt_parents = known_blocks or list(dict.fromkeys(m.context_id for m in reranked or before))
    missing = unknown_blocks + [
        i
        for trace, ended, named in unresolved
        if trace == span.trace_id and ended <= started
        for i in named
    ]
    missing = list(dict.fromkeys(missing))[:MAX_LISTED]
    prompt_id, answer_id = reading.record_id("prompt"), reading.record_id("answer")
    if (not prompt_parents and not missing) or prompt_id in resolved.ids:
        return [_made(reading, answer_id, "answer")] if prompt_id in resolved.ids else []
    identity = _identity(reading)
    if not prompt_parents:
        query_id = reading.record_id("query")
        service = quote(span.service_name or "unknown", safe="")
        mapped.derivations.append(
            Derivation(
                [],
                reading.input_text,
                "query",
                source_uri=f"otel://{service}/{span.trace_id}",
                trace_id=span.trace_id,
                attributes={"otel": identity},
                context_id=query_id,
            )
        )
        prompt_parents = [query_id]
    mapped.derivations.append(
        Derivation(
            prompt_parents,
            reading.input_text,
            "prompt",
            trace_id=span.trace_id,
            attributes={"otel": identity} | ({"unknown_ids": missing} if missing else {}),
            context_id=prompt_id,
        )
    )
    if not reading.output_text:
        return []
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
    return [_made(reading, answer_id, "answer")]
