"""What lineage reads from one span: its role in a RAG or agent run (retrieval, rerank,
embedding, LLM call, tool call, agent invocation) and what it names (documents, texts, model,
tool, session), in the words of the OpenInference and OpenTelemetry GenAI semantic conventions.
lineage.interop.otlp_lineage makes records of it; docs/traces.md has the mapping table. Texts
(inputs, outputs, document contents, messages, embeddings, tool arguments and results) are
hashed before a span is stored: hashed_text().
"""

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from lineage.core.hashing import content_hash
from lineage.core.record import ID_PATTERN
from lineage.core.telemetry import CONSUMED_ATTRIBUTE, PRODUCED_ATTRIBUTE
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
OI_RERANKED = re.compile(
    r"^reranker\.(input|output)_documents\.(\d+)\.document\.(id|score|content|metadata)$"
)
OI_RERANKER_MODEL = "reranker.model_name"
OI_RERANKER_TOP_K = "reranker.top_k"
OI_SESSION = "session.id"
# OpenTelemetry GenAI semantic conventions (opentelemetry-semantic-conventions, incubating).
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_DOCUMENTS = "gen_ai.retrieval.documents"
GEN_AI_DATA_SOURCE = "gen_ai.data_source.id"
GEN_AI_INPUT = "gen_ai.input.messages"
GEN_AI_OUTPUT = "gen_ai.output.messages"
GEN_AI_MODELS = ("gen_ai.response.model", "gen_ai.request.model")
GEN_AI_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
GEN_AI_DIMENSIONS = "gen_ai.embeddings.dimension.count"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_RESULT = "gen_ai.tool.call.result"
GEN_AI_CONVERSATION = "gen_ai.conversation.id"

LOCAL_ATTRIBUTE = "lineage.unknown_ids"
MAX_LISTED = 50  # unknown ids kept per span, and scores per retrieval record
SOURCE_KEYS = ("source_uri", "source", "file_path", "url")
MAX_NAME_CHARS = 256  # a tool's or an agent's name
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
    index_snapshot: str | None = None

    def shown(self) -> str:
        return self.context_id or self.source_uri or self.content_hash or "?"


@dataclass
class SpanReading:
    """What lineage reads from one span."""

    span: SpanIn
    # "retrieval", "rerank", "embedding", "llm", "tool", "agent" or None
    role: str | None = None
    documents: list[DocumentRef] = field(default_factory=list)  # retrieved, kept, or embedded
    inputs: list[DocumentRef] = field(default_factory=list)  # what a reranker was given
    top_k: int | None = None
    dimensions: int | None = None
    data_source: str | None = None
    index_snapshot: str | None = None
    name: str | None = None  # the tool's, or the agent's
    session_id: str | None = None
    input_hash: str | None = None  # a tool call's arguments
    block_ids: list[str] = field(default_factory=list)
    input_text: str = ""
    output_text: str = ""
    model: str | None = None
    noted_ids: list[str] = field(default_factory=list)  # ctx.consumed_ids / ctx.produced_ids
    listed_unknown: list[str] = field(default_factory=list)  # a stored span's unknown ids

    def record_id(self, role: str) -> str:
        return f"otel:{self.span.trace_id}:{self.span.span_id}:{role}"

    def record_ids(self) -> list[str]:
        """The ids of the records this span makes (some, when its references resolve)."""
        if self.role == "embedding":
            return [self.record_id(f"embedding.{n}") for n in range(len(self.documents))]
        made = {"llm": "prompt", "tool": "tool_call", "agent": "reasoning"}
        return [self.record_id(made.get(self.role, self.role))] if self.role else []


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
    snapshot = metadata.get("index_snapshot")
    return DocumentRef(
        context_id=context_id,
        score=_score(fields.get("score")),
        content_hash=content_hash(content) if isinstance(content, str) and content else None,
        source_uri=source or None,
        index_snapshot=snapshot if isinstance(snapshot, str) and snapshot else None,
    )


def _openinference_documents(attributes: dict[str, Any]) -> list[DocumentRef]:
    by_index: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if match := OI_DOCUMENTS.fullmatch(key):
            by_index.setdefault(int(match[1]), {})[match[2]] = value
    return [_document(by_index[i]) for i in sorted(by_index)]


def _reranked_documents(attributes: dict[str, Any], side: str) -> list[DocumentRef]:
    by_index: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if (match := OI_RERANKED.fullmatch(key)) and match[1] == side:
            by_index.setdefault(int(match[2]), {})[match[3]] = value
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


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= MAX_NAME_CHARS else None


def _outputs(attributes: dict[str, Any]) -> str:
    outputs = [attributes.get(GEN_AI_OUTPUT)]
    outputs += [v for k, v in attributes.items() if OI_OUTPUT_MESSAGE.fullmatch(k)]
    return "\n".join(t for t in map(_text, outputs) if t) or _text(attributes.get(OI_OUTPUT))


def read_span(span: SpanIn) -> SpanReading:
    attributes = span.attributes
    reading = SpanReading(span)
    for name in (CONSUMED_ATTRIBUTE, PRODUCED_ATTRIBUTE, LOCAL_ATTRIBUTE):
        noted = attributes.get(name)
        if isinstance(noted, list):
            ids = [i for i in noted if isinstance(i, str)]
            if name == LOCAL_ATTRIBUTE:
                reading.listed_unknown = ids
            else:
                reading.noted_ids += ids
    oi_kind = attributes.get(OI_SPAN_KIND)
    operation = attributes.get(GEN_AI_OPERATION)
    reading.data_source = _name(attributes.get(GEN_AI_DATA_SOURCE))
    session = _name(attributes.get(GEN_AI_CONVERSATION)) or _name(attributes.get(OI_SESSION))
    reading.session_id = session if session and ID_PATTERN.fullmatch(session) else None
    if oi_kind == "RETRIEVER" or operation == "retrieval":
        reading.documents = _openinference_documents(attributes) + _gen_ai_documents(attributes)
        reading.role = "retrieval" if reading.documents else None
        named = (d.index_snapshot for d in reading.documents if d.index_snapshot)
        reading.index_snapshot = next(named, None)
    elif oi_kind == "RERANKER":
        _read_reranker(reading, attributes)
    elif operation in ("execute_tool", "invoke_agent"):
        _read_agent_step(reading, attributes, operation)
    elif oi_kind == "EMBEDDING" or operation == "embeddings":
        texts, dimensions = _embedded_texts(attributes)
        reading.documents = [_document({"content": text}) for text in texts]
        counted = _score(attributes.get(GEN_AI_DIMENSIONS))
        reading.dimensions = int(counted) if counted else dimensions
        reading.model = _model(attributes, OI_EMBEDDING_MODEL, *GEN_AI_MODELS)
        reading.role = "embedding" if reading.documents and reading.model else None
    elif oi_kind == "LLM" or operation in GEN_AI_LLM_OPERATIONS:
        inputs = [attributes.get(OI_PROMPTS), attributes.get(GEN_AI_INPUT)]
        inputs += [v for k, v in attributes.items() if OI_INPUT_MESSAGE.fullmatch(k)]
        reading.input_text = "\n".join(t for t in map(_text, inputs) if t) or _text(
            attributes.get(OI_INPUT)
        )
        reading.output_text = _outputs(attributes)
        everything = reading.input_text + "\n" + _text(attributes.get(OI_INPUT))
        reading.block_ids = list(dict.fromkeys(CONTEXT_BLOCK.findall(everything)))
        reading.model = _model(attributes, OI_MODEL, *GEN_AI_MODELS)
        # A call that says nothing of its content (a GenAI client span with content capture off,
        # under the framework's LLM span) is no generation of its own, only that call's transport.
        reading.role = "llm" if reading.input_text or reading.output_text else None
    return reading


def _read_reranker(reading: SpanReading, attributes: dict[str, Any]) -> None:
    """What a reranker was given (its input) and kept (its output, in its order)."""
    reading.documents = _reranked_documents(attributes, "output")
    reading.inputs = _reranked_documents(attributes, "input")
    top_k = _score(attributes.get(OI_RERANKER_TOP_K))
    reading.top_k = int(top_k) if top_k is not None else None
    reading.model = _model(attributes, OI_RERANKER_MODEL)
    reading.role = "rerank" if reading.documents else None


def _read_agent_step(reading: SpanReading, attributes: dict[str, Any], operation: str) -> None:
    """A GenAI tool execution (its tool, the hashes of its arguments and result) or agent
    invocation (its agent, model and output)."""
    if operation == "invoke_agent":
        reading.role = "agent"
        reading.name = _name(attributes.get(GEN_AI_AGENT_NAME))
        reading.output_text = _outputs(attributes)
        reading.model = _model(attributes, *GEN_AI_MODELS)
        return
    reading.name = _name(attributes.get(GEN_AI_TOOL_NAME)) or _name(reading.span.name)
    arguments = attributes.get(GEN_AI_TOOL_ARGUMENTS)
    reading.input_hash = content_hash(_text(arguments)) if arguments is not None else None
    result = attributes.get(GEN_AI_TOOL_RESULT)
    reading.output_text = _text(result)
    reading.role = "tool" if result is not None or reading.input_hash else None


def hashed_text(attributes: dict[str, Any]) -> dict[str, Any]:
    """The attributes to store: every text replaced by its sha256."""
    return {
        key: content_hash(_text(value))
        if TEXT_ATTRIBUTES.search(key) and value not in (None, "")
        else value
        for key, value in attributes.items()
    }
