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
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lineage.core.derive import Derivation
from lineage.core.hashing import content_hash
from lineage.core.record import ID_PATTERN
from lineage.core.telemetry import CONSUMED_ATTRIBUTE, PRODUCED_ATTRIBUTE
from lineage.db.database import Transaction
from lineage.services.spans import SpanIn

# OpenInference semantic conventions (openinference-semantic-conventions).
OI_SPAN_KIND = "openinference.span.kind"
OI_DOCUMENTS = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(id|score|content|metadata)$")
OI_INPUT = "input.value"
OI_OUTPUT = "output.value"
OI_INPUT_MESSAGE = re.compile(r"^llm\.input_messages\.\d+\.message\.content$")
OI_OUTPUT_MESSAGE = re.compile(r"^llm\.output_messages\.\d+\.message\.content$")
OI_PROMPTS = "llm.prompts"
OI_MODEL = "llm.model_name"
OI_EMBEDDINGS = re.compile(r"^embedding\.embeddings\.(\d+)\.embedding\.(text|vector)$")
OI_EMBEDDING_MODEL = "embedding.model_name"
# OpenTelemetry GenAI semantic conventions (opentelemetry-semantic-conventions, incubating).
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_DOCUMENTS = "gen_ai.retrieval.documents"
GEN_AI_DATA_SOURCE = "gen_ai.data_source.id"
GEN_AI_INPUT = "gen_ai.input.messages"
GEN_AI_OUTPUT = "gen_ai.output.messages"
GEN_AI_MODELS = ("gen_ai.response.model", "gen_ai.request.model")
GEN_AI_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
GEN_AI_DIMENSIONS = "gen_ai.embeddings.dimension.count"

LOCAL_ATTRIBUTE = "lineage.unknown_ids"
MAX_LISTED = 50  # unknown ids kept per span, and scores per retrieval record
SOURCE_KEYS = ("source_uri", "source", "file_path", "url")
CONTEXT_BLOCK = re.compile(r'<context id="([^"]{1,128})">')
# Attributes that hold text (or vectors of it): hashed on the way in, never stored.
TEXT_ATTRIBUTES = re.compile(
    r"^(input\.value|output\.value|llm\.prompts|llm\.prompt_template\.variables"
    r"|gen_ai\.(input|output)\.messages|gen_ai\.system_instructions|gen_ai\.prompt"
    r"|gen_ai\.completion|gen_ai\.retrieval\.query\.text|gen_ai\.tool\.call\.(arguments|result))$"
    r"|\.(content|text|vector|arguments)$"
)


@dataclass(frozen=True)
class DocumentRef:
    """One retrieved document as a span names it."""

    context_id: str | None
    score: float | None
    content_hash: str | None
    source_uri: str | None

    def shown(self) -> str:
        return self.context_id or self.source_uri or self.content_hash or "?"


@dataclass
class SpanReading:
    """What lineage reads from one span."""

    span: SpanIn
    role: str | None = None  # "retrieval", "embedding", "llm" or None
    documents: list[DocumentRef] = field(default_factory=list)  # retrieved, or embedded
    dimensions: int | None = None
    index_snapshot: str | None = None
    block_ids: list[str] = field(default_factory=list)
    input_text: str = ""
    output_text: str = ""
    model: str | None = None
    noted_ids: list[str] = field(default_factory=list)  # ctx.consumed_ids / ctx.produced_ids

    def record_id(self, role: str) -> str:
        return f"otel:{self.span.trace_id}:{self.span.span_id}:{role}"

    def record_ids(self) -> list[str]:
        """The ids of the records this span makes (some, when its references resolve)."""
        if self.role == "embedding":
            return [self.record_id(f"embedding.{n}") for n in range(len(self.documents))]
        if self.role is None:
            return []
        return [self.record_id("prompt" if self.role == "llm" else "retrieval")]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(item) for item in value)
    return json.dumps(value, sort_keys=True)


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _score(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and abs(value) < 2**53 else None


def _document(fields: dict[str, Any]) -> DocumentRef:
    metadata = _json(fields.get("metadata"))
    metadata = metadata if isinstance(metadata, dict) else {}
    candidates = [fields.get("id"), metadata.get("context_id"), metadata.get("lineage.context_id")]
    context_id = next(
        (str(c) for c in candidates if isinstance(c, str | int) and ID_PATTERN.fullmatch(str(c))),
        None,
    )
    source = next((metadata[k] for k in SOURCE_KEYS if isinstance(metadata.get(k), str)), None)
    content = fields.get("content")
    return DocumentRef(
        context_id=context_id,
        score=_score(fields.get("score")),
        content_hash=content_hash(content) if isinstance(content, str) and content else None,
        source_uri=source or None,
    )


def _openinference_documents(attributes: dict[str, Any]) -> list[DocumentRef]:
    by_index: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if match := OI_DOCUMENTS.fullmatch(key):
            by_index.setdefault(int(match[1]), {})[match[2]] = value
    return [_document(by_index[i]) for i in sorted(by_index)]


def _gen_ai_documents(attributes: dict[str, Any]) -> list[DocumentRef]:
    documents = _json(attributes.get(GEN_AI_DOCUMENTS))
    if not isinstance(documents, list):
        return []
    return [_document(d) for d in documents if isinstance(d, dict)]


def _embedded_texts(attributes: dict[str, Any]) -> tuple[list[str], int | None]:
    """The texts an embedding span embedded (OpenInference's per embedding, else GenAI's input
    messages: strings, or messages of text parts), and the length of its first vector."""
    by_index: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if match := OI_EMBEDDINGS.fullmatch(key):
            by_index.setdefault(int(match[1]), {})[match[2]] = value
    texts = [by_index[i].get("text") for i in sorted(by_index)]
    vectors = [by_index[i]["vector"] for i in sorted(by_index) if "vector" in by_index[i]]
    dimensions = len(vectors[0]) if vectors and isinstance(vectors[0], list) else None
    if not by_index:
        messages = _json(attributes.get(GEN_AI_INPUT))
        texts = [_message_text(m) for m in messages] if isinstance(messages, list) else []
    return [t if isinstance(t, str) else "" for t in texts], dimensions


def _message_text(message: Any) -> str:
    """An input as text: a string, or a message's `content` or text parts."""
    if not isinstance(message, dict):
        return message if isinstance(message, str) else ""
    parts = message.get("parts")
    parts = parts if isinstance(parts, list) else [message]
    return "\n".join(
        p["content"] for p in parts if isinstance(p, dict) and isinstance(p.get("content"), str)
    )


def _model(attributes: dict[str, Any], *names: str) -> str | None:
    model = next((m for m in (attributes.get(k) for k in names) if isinstance(m, str)), None)
    return model if model and model != "unknown" else None


def read_span(span: SpanIn) -> SpanReading:
    attributes = span.attributes
    reading = SpanReading(span)
    for name in (CONSUMED_ATTRIBUTE, PRODUCED_ATTRIBUTE):
        noted = attributes.get(name)
        if isinstance(noted, list):
            reading.noted_ids += [i for i in noted if isinstance(i, str)]
    oi_kind = attributes.get(OI_SPAN_KIND)
    operation = attributes.get(GEN_AI_OPERATION)
    data_source = attributes.get(GEN_AI_DATA_SOURCE)
    reading.index_snapshot = data_source if isinstance(data_source, str) and data_source else None
    if oi_kind == "RETRIEVER" or operation == "retrieval":
        reading.documents = _openinference_documents(attributes) + _gen_ai_documents(attributes)
        reading.role = "retrieval" if reading.documents else None
    elif oi_kind == "EMBEDDING" or operation == "embeddings":
        texts, dimensions = _embedded_texts(attributes)
        reading.documents = [_document({"content": text}) for text in texts]
        counted = _score(attributes.get(GEN_AI_DIMENSIONS))
        reading.dimensions = int(counted) if counted else dimensions
        reading.model = _model(attributes, OI_EMBEDDING_MODEL, *GEN_AI_MODELS)
        reading.role = "embedding" if reading.documents and reading.model else None
    elif oi_kind == "LLM" or operation in GEN_AI_LLM_OPERATIONS:
        reading.role = "llm"
        inputs = [attributes.get(OI_PROMPTS), attributes.get(GEN_AI_INPUT)]
        inputs += [v for k, v in attributes.items() if OI_INPUT_MESSAGE.fullmatch(k)]
        reading.input_text = "\n".join(t for t in map(_text, inputs) if t) or _text(
            attributes.get(OI_INPUT)
        )
        outputs = [attributes.get(GEN_AI_OUTPUT)]
        outputs += [v for k, v in attributes.items() if OI_OUTPUT_MESSAGE.fullmatch(k)]
        reading.output_text = "\n".join(t for t in map(_text, outputs) if t) or _text(
            attributes.get(OI_OUTPUT)
        )
        everything = reading.input_text + "\n" + _text(attributes.get(OI_INPUT))
        reading.block_ids = list(dict.fromkeys(CONTEXT_BLOCK.findall(everything)))
        reading.model = _model(attributes, OI_MODEL, *GEN_AI_MODELS)
    return reading


def hashed_text(attributes: dict[str, Any]) -> dict[str, Any]:
    """The attributes to store: every text replaced by its sha256."""
    return {
        key: content_hash(_text(value))
        if TEXT_ATTRIBUTES.search(key) and value not in (None, "")
        else value
        for key, value in attributes.items()
    }


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
