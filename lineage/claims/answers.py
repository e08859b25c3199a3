"""Prompts, answers and claims: what the model was shown, what it said, and what it cited.

`record_prompt` records a `prompt` whose parents are exactly the contexts rendered into it, so
"was this id in the prompt?" is membership of the prompt's `parent_ids`. `record_answer` turns a
model's output into one `claim` record per claim and one `answer` record over them. A claim's
parents are its prompt plus the cited ids that were in that prompt; every cited id, as written,
is kept in its attributes (`cited_ids`). An id that was not in the prompt is never looked up, so
an invented id and another tenant's id are recorded alike and reveal nothing.

The output may take any of these shapes (see `parse_output`):

- `{"claims": [{"text": ..., "supported_by": [ids], "citations": [...]}], "text": ...}`;
- `{"text": "... [ctx_17]. ...", "citations": [...]}`: the answer text, split into one claim per
  sentence or line; citations here need an offset (`index`, or `start_index`/`end_index`);
- Anthropic messages `{"content": [{"type": "text", "text": ..., "citations": [...]}]}`;
- OpenAI responses `{"output": [{"type": "message", "content": [{"type": "output_text",
  "text": ..., "annotations": [...]}]}]}`.

Citations: `[id]` or `[id1, id2]` markers inline; Anthropic `document_index` (the i-th context
of the prompt, in the order given to `record_prompt`; char/page/block offsets are kept, cited
text is not); OpenAI `file_citation` (`file_id` is a context id or a key of `file_ids`); and
`{"context_id": ...}`. Other citation types (URLs, web results) are counted, not cited.
"""

import bisect
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from lineage.core.body import Body
from lineage.core.derive import Context, Derivation, derive, derive_many, render_for_prompt
from lineage.core.errors import BadParameter, InvalidRecord, NotFound
from lineage.core.hashing import Sha256, text_matches_hash
from lineage.core.record import ContextRecord, new_context_id
from lineage.core.store import Store
from lineage.db.database import Database
from lineage.services import privacy
from lineage.services.records import get_records
from lineage.services.transaction_store import TransactionStore

__all__ = [
    "AnswerRecorded",
    "ClaimRecorded",
    "ParsedAnswer",
    "ParsedClaim",
    "capture_texts",
    "claim_hypothesis",
    "in_prompt",
    "parse_output",
    "record_answer",
    "record_prompt",
]

ID_CHARS = r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}"
# `[ctx_17]` or `[ctx_17, ctx_42]`: ids as render_for_prompt shows them.
MARKER = re.compile(rf"\[\s*({ID_CHARS}(?:\s*,\s*{ID_CHARS})*)\s*\]")
# A sentence ends at . ! or ? (closing quotes and inline markers stay with it) before a space.
_SENTENCE_END = re.compile(rf"[.!?]+[\"')\u201d\u2019]*(?:[ \t]*{MARKER.pattern})*")
# A period after these is not a sentence end.
_ABBREVIATION = re.compile(
    r"(?:\b(?:e\.g|i\.e|etc|vs|cf|approx|incl|Mr|Mrs|Ms|Dr|St|No|Art|Sec|Fig)|\b[A-Z])\.$"
)
# The longest abbreviation above with its stop, plus the character before it for \b.
_ABBREVIATION_WINDOW = 8
MAX_CITED_CHARS = 256
# Per-field bounds on a model's output: what one answer may make the service parse and record.
MAX_ANSWER_CHARS = 100_000
MAX_CLAIM_CHARS = 10_000
MAX_CLAIMS = 1_000
MAX_CITATIONS = 2_000
# Offsets worth keeping from provider citations; cited text is never kept (provenance holds no
# text).
_CITATION_OFFSETS = (
    "start_char_index",
    "end_char_index",
    "start_page_number",
    "end_page_number",
    "start_block_index",
    "end_block_index",
    "index",
    "start_index",
    "end_index",
)


# --- prompts -----------------------------------------------------------------------------------


async def record_prompt(
    store: Store,
    contexts: Sequence[Context],
    produced_by: str | None = None,
    trace_id: str | None = None,
) -> Context:
    """Record the prompt built from `contexts` (parents, in order) and return its rendered text.

    Pass exactly the contexts given to the model, in the order given: an Anthropic citation's
    `document_index` i is the i-th of them.
    """
    return await derive(
        store,
        list(contexts),
        render_for_prompt(contexts),
        "prompt",
        produced_by=produced_by,
        trace_id=trace_id,
        attributes={"contexts": len(contexts)},
    )


def in_prompt(prompt: ContextRecord, context_id: str) -> bool:
    """Was this id in the prompt? Set membership only: nothing else is looked up."""
    return context_id in prompt.parent_ids


# --- parsing model output ----------------------------------------------------------------------


@dataclass
class ParsedClaim:
    text: str
    cited_ids: list[str] = field(default_factory=list)
    citations: list[dict[str, Any]] = field(default_factory=list)

    def cite(self, cited_id: str, detail: dict[str, Any] | None = None) -> None:
        if cited_id not in self.cited_ids:
            self.cited_ids.append(cited_id)
        if detail is not None:
            self.citations.append(detail)


@dataclass
class ParsedAnswer:
    text: str
    claims: list[ParsedClaim]
    ignored_citations: int = 0


def _as_cited(value: object) -> str:
    """An id exactly as the model wrote it, cut short only to keep attributes bounded."""
    written = value if isinstance(value, str) else json.dumps(value)
    return written if len(written) <= MAX_CITED_CHARS else written[:MAX_CITED_CHARS] + "…"


def _resolve_citation(
    citation: object, prompt_ids: Sequence[str], file_ids: Mapping[str, str]
) -> tuple[str, dict[str, Any]] | None:
    """The id one provider citation names, with the offsets worth keeping; None if it names none."""
    if not isinstance(citation, dict):
        return _as_cited(citation), {"type": "id"}
    detail: dict[str, Any] = {
        key: citation[key] for key in _CITATION_OFFSETS if isinstance(citation.get(key), int)
    }
    kind = citation.get("type")
    if "document_index" in citation:
        index = citation["document_index"]
        shown = index if isinstance(index, int) else _as_cited(index)
        detail |= {"type": str(kind or "char_location"), "document_index": shown}
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(prompt_ids):
            cited = prompt_ids[index]
        else:
            # '=' never occurs in an id, so a document the prompt did not have stays unmatched.
            cited = f"document_index={_as_cited(index)}"
        return cited, detail | {"context_id": cited}
    if kind == "file_citation":
        nested = citation.get("file_citation")
        file_id = citation.get("file_id") or (
            nested.get("file_id") if isinstance(nested, dict) else None
        )
        if file_id is None:
            raise BadParameter("a file_citation must carry file_id")
        written = _as_cited(file_id)
        cited = file_ids.get(written, written)
        return cited, detail | {"type": "file_citation", "file_id": written, "context_id": cited}
    if "context_id" in citation:
        cited = _as_cited(citation["context_id"])
        return cited, detail | {"type": str(kind or "context"), "context_id": cited}
    return None


def _markers(text: str) -> list[str]:
    return [part.strip() for found in MARKER.findall(text) for part in found.split(",")]


def claim_hypothesis(text: str) -> str:
    """The claim as a judge should read it: citation markers out, spacing tidied."""
    bare = MARKER.sub("", text)
    bare = re.sub(r"[ \t]+([.,;:!?])", r"\1", bare)
    return re.sub(r"\s+", " ", bare).strip()


def _sentences(text: str) -> list[tuple[int, int]]:
    """Spans of the sentences and lines of `text`, trimmed; a piece that is only markers joins
    the sentence before it (or, first of all, the one after)."""
    pieces: list[tuple[int, int]] = []
    for line in re.finditer(r"[^\n]+", text):
        start = line.start()
        for end_match in _SENTENCE_END.finditer(text, line.start(), line.end()):
            end = end_match.end()
            # Only the word before the stop can make it an abbreviation: look at that much, not
            # the whole sentence so far (which made "A. A. A. ..." quadratic).
            stop = text[
                max(start, end_match.start() - _ABBREVIATION_WINDOW) : end_match.start() + 1
            ]
            if _ABBREVIATION.search(stop):
                continue
            if end == line.end() or text[end].isspace():
                pieces.append((start, end))
                start = end
        pieces.append((start, line.end()))
    spans: list[tuple[int, int]] = []
    pending: int | None = None
    for start, end in pieces:
        chunk = text[start:end]
        if not chunk.strip():
            continue
        left, right = start + len(chunk) - len(chunk.lstrip()), start + len(chunk.rstrip())
        if re.search(r"\w", claim_hypothesis(chunk)):
            spans.append((left if pending is None else pending, right))
            pending = None
        elif spans:
            spans[-1] = (spans[-1][0], right)
        elif pending is None:
            pending = left
    if pending is not None:
        spans.append((pending, len(text.rstrip())))
    return spans


def _anchor(citation: object) -> tuple[int, int] | None:
    """Where in the answer text a citation sits: a span, or a point (the text before it)."""
    if not isinstance(citation, dict):
        return None
    start, end = citation.get("start_index"), citation.get("end_index")
    if isinstance(start, int) and isinstance(end, int):
        return start, max(start, end)
    point = citation.get("index")
    if isinstance(point, int):
        return max(point - 1, 0), max(point - 1, 0) + 1
    return None


def _split_text(
    text: str,
    anchored: Sequence[tuple[tuple[int, int] | None, object]],
    prompt_ids: Sequence[str],
    file_ids: Mapping[str, str],
) -> ParsedAnswer:
    _bound("the answer text", len(text), MAX_ANSWER_CHARS, "characters")
    _bound("citations", len(anchored), MAX_CITATIONS, "")
    spans = _sentences(text)
    _bound("claims (sentences)", len(spans), MAX_CLAIMS, "")
    starts = [start for start, _ in spans]
    ends = [end for _, end in spans]
    claims = [ParsedClaim(text[start:end]) for start, end in spans]
    for claim in claims:
        _bound("a claim", len(claim.text), MAX_CLAIM_CHARS, "characters")
    for claim in claims:
        for marker in _markers(claim.text):
            claim.cite(_as_cited(marker))
    ignored = 0
    for where, citation in anchored:
        resolved = _resolve_citation(citation, prompt_ids, file_ids)
        if resolved is None:
            ignored += 1
            continue
        if where is None:
            raise BadParameter(
                "a citation on an answer text needs its offset in the text (index, or "
                "start_index and end_index) to say which sentence it supports; or send claims"
            )
        low, high = where
        # Spans are sorted and disjoint: the ones overlapping [low, high) are found by bisection.
        first = bisect.bisect_right(ends, low)
        last = bisect.bisect_left(starts, max(high, low + 1))
        hit = list(range(first, last))
        if not hit and spans:
            # A citation after the last sentence, or in the gap after one, backs that sentence.
            hit = [max(bisect.bisect_right(starts, low) - 1, 0)]
        for i in hit:
            claims[i].cite(*resolved)
    return ParsedAnswer(text, claims, ignored)


def _claims_list(
    output: Mapping[str, Any], prompt_ids: Sequence[str], file_ids: Mapping[str, str]
) -> ParsedAnswer:
    claims: list[ParsedClaim] = []
    ignored = 0
    _bound("claims", len(output["claims"]), MAX_CLAIMS, "")
    for position, item in enumerate(output["claims"]):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise BadParameter(f"claims[{position}] must be an object with a text string")
        _bound(f"claims[{position}].text", len(item["text"]), MAX_CLAIM_CHARS, "characters")
        claim = ParsedClaim(item["text"])
        for cited in _listed(item, "supported_by"):
            claim.cite(_as_cited(cited))
        for marker in _markers(claim.text):
            claim.cite(_as_cited(marker))
        for citation in [*_listed(item, "citations"), *_listed(item, "annotations")]:
            resolved = _resolve_citation(citation, prompt_ids, file_ids)
            if resolved is None:
                ignored += 1
            else:
                claim.cite(*resolved)
        claims.append(claim)
    text = output.get("text")
    if text is not None and not isinstance(text, str):
        raise BadParameter("text must be a string")
    _bound("the answer text", len(text or ""), MAX_ANSWER_CHARS, "characters")
    return ParsedAnswer(text or " ".join(c.text for c in claims), claims, ignored)


def _bound(what: str, size: int, limit: int, unit: str) -> None:
    if size > limit:
        raise BadParameter(f"{what}: {size} {unit or 'items'}; at most {limit} allowed".strip())


def _listed(holder: Mapping[str, Any], key: str) -> list[Any]:
    value = holder.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadParameter(f"{key} must be a list")
    return value


def _text_blocks(blocks: object, where: str) -> list[Mapping[str, Any]]:
    if not isinstance(blocks, list):
        raise BadParameter(f"{where} must be a list of content blocks")
    return [b for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]


def parse_output(
    output: Mapping[str, Any],
    prompt_ids: Sequence[str],
    file_ids: Mapping[str, str] | None = None,
) -> ParsedAnswer:
    """Claims and their cited ids from any accepted output shape (see the module docstring)."""
    files = file_ids or {}
    if "claims" in output:
        if not isinstance(output["claims"], list):
            raise BadParameter("claims must be a list")
        return _claims_list(output, prompt_ids, files)
    pieces: list[str] = []
    anchored: list[tuple[tuple[int, int] | None, object]] = []
    if isinstance(output.get("text"), str):
        pieces.append(output["text"])
        for citation in [*_listed(output, "citations"), *_listed(output, "annotations")]:
            anchored.append((_anchor(citation), citation))
    elif "content" in output:
        # Anthropic: a cited block backs the sentences it overlaps in the joined text.
        offset = 0
        for block in _text_blocks(output["content"], "content"):
            end = offset + len(block["text"])
            anchored += [((offset, end), c) for c in block.get("citations") or []]
            pieces.append(block["text"])
            offset = end
    elif "output" in output:
        # OpenAI responses: annotation offsets count from the start of their own output_text.
        offset = 0
        items = output["output"] if isinstance(output["output"], list) else []
        for item in items:
            if not isinstance(item, dict) or item.get("type") != "message":
                continue
            for part in _text_blocks(item.get("content"), "output[].content"):
                for annotation in part.get("annotations") or []:
                    where = _anchor(annotation)
                    shifted = None if where is None else (where[0] + offset, where[1] + offset)
                    anchored.append((shifted, annotation))
                pieces.append(part["text"])
                offset += len(part["text"])
    else:
        raise BadParameter(
            "output must carry claims, text, content (Anthropic) or output (OpenAI responses)"
        )
    return _split_text("".join(pieces), anchored, prompt_ids, files)


# --- recording answers -------------------------------------------------------------------------


class ClaimRecorded(Body):
    claim_id: str
    cited_ids: list[str]
    in_prompt: list[str]
    not_in_prompt: list[str]
    lineage: str
    text: str = Field(exclude=True)  # for the caller in process; the API never sends text


class AnswerRecorded(Body):
    answer_id: str
    prompt_id: str
    created: bool
    captured_text: bool
    ignored_citations: int
    claims: list[ClaimRecorded]
    verify: str
    answer: Context = Field(exclude=True)  # the recorded answer, for the caller in process


def _claim_id(tenant_id: str, answer_id: str | None, position: int) -> str:
    """Claims of a caller-named answer get fixed ids, so a replay writes nothing twice."""
    if answer_id is None:
        return new_context_id()
    key = f"{tenant_id}\x00{answer_id}\x00claim\x00{position}".encode()
    return "ctx_" + Sha256().hexdigest(key)[:32]


async def record_answer(
    store: Store,
    prompt_id: str,
    output: Mapping[str, Any],
    produced_by: str | None = None,
    model: str | None = None,
    trace_id: str | None = None,
    *,
    answer_id: str | None = None,
    file_ids: Mapping[str, str] | None = None,
    capture_text: bool = False,
) -> AnswerRecorded:
    """Record a model's output for a recorded prompt: its claims, then the answer over them.

    The claims and the answer are appended in one transaction (all or none). `trace_id`
    defaults to the prompt's. `answer_id` names the answer and makes a replay a no-op.
    `file_ids` maps OpenAI file ids to context ids. `capture_text` (opt-in) also stores the
    claim and answer texts in context_text; it needs a store that reaches the database and the
    tenant's capture_answer_text switch (else InvalidRecord `capture_off`, nothing recorded).
    Raises NotFound for an unknown prompt, BadParameter for unreadable output.
    """
    prompt = await store.get(prompt_id)
    if prompt is None:
        raise NotFound(f"no context {prompt_id}")
    if prompt.kind != "prompt":
        raise BadParameter(
            f"{prompt_id} is a {prompt.kind}, not a prompt: record it with record_prompt"
        )
    parsed = parse_output(output, prompt.parent_ids, file_ids)
    scope = set(prompt.parent_ids)
    common: dict[str, Any] = {"produced_by": produced_by, "trace_id": trace_id or prompt.trace_id}
    model_attribute: dict[str, Any] = {"model": model} if model else {}
    items: list[Derivation] = []
    for position, claim in enumerate(parsed.claims):
        attributes = model_attribute | {"prompt_id": prompt_id, "cited_ids": claim.cited_ids}
        if claim.citations:
            attributes["citations"] = claim.citations
        inside = [cited for cited in claim.cited_ids if cited in scope]
        items.append(
            Derivation(
                [prompt_id, *inside],
                claim.text,
                "claim",
                attributes=attributes,
                context_id=_claim_id(store.tenant_id, answer_id, position),
                **common,
            )
        )
    claim_ids = [item.context_id or "" for item in items]
    # An answer with no claims ("I don't know") still hangs from what it was asked.
    items.append(
        Derivation(
            claim_ids or [prompt_id],
            parsed.text,
            "answer",
            attributes=model_attribute | {"prompt_id": prompt_id, "claims": len(claim_ids)},
            context_id=answer_id or new_context_id(),
            **common,
        )
    )
    existed = answer_id is not None and await store.get(answer_id) is not None
    *claims, answer = await derive_many(store, items, capture_text=capture_text)
    return AnswerRecorded(
        answer_id=answer.context_id,
        prompt_id=prompt_id,
        created=not existed,
        captured_text=capture_text,
        ignored_citations=parsed.ignored_citations,
        claims=[
            ClaimRecorded(
                claim_id=c.context_id,
                cited_ids=p.cited_ids,
                in_prompt=[cited for cited in p.cited_ids if cited in scope],
                not_in_prompt=[cited for cited in p.cited_ids if cited not in scope],
                lineage=f"/v1/contexts/{c.context_id}/lineage",
                text=p.text,
            )
            for c, p in zip(claims, parsed.claims, strict=True)
        ],
        verify=f"/v1/answers/{answer.context_id}/verify",
        answer=answer,
    )


async def store_answer(
    database: Database,
    tenant_id: str,
    prompt_id: str,
    output: Mapping[str, Any],
    produced_by: str | None = None,
    model: str | None = None,
    trace_id: str | None = None,
    *,
    answer_id: str | None = None,
    file_ids: Mapping[str, str] | None = None,
    capture_text: bool = False,
) -> AnswerRecorded:
    """record_answer in one tenant transaction, reads and appends alike (the API's verb)."""
    async with database.tenant(tenant_id) as tx:
        return await record_answer(
            TransactionStore(tx),
            prompt_id,
            output,
            produced_by,
            model,
            trace_id,
            answer_id=answer_id,
            file_ids=file_ids,
            capture_text=capture_text,
        )


# --- captured text -----------------------------------------------------------------------------


async def capture_texts(database: Database, tenant_id: str, texts: Mapping[str, str]) -> list[str]:
    """Store opt-in text for existing records (id -> text); returns the ids newly captured.

    Each text must hash to its record's content_hash, so a verdict is never judged on other
    words than were recorded. A record already captured keeps its text. Each record's class
    of text must be switched on for the tenant (lineage.services.privacy), else InvalidRecord
    `capture_off` and nothing is captured.
    """
    async with database.tenant(tenant_id) as tx:
        records = await get_records(tx, list(texts))
        hashes = {context_id: record.content_hash for context_id, record in records.items()}
        missing = [context_id for context_id in texts if context_id not in hashes]
        if missing:
            raise NotFound(f"no context {missing[0]}")
        key = await privacy.text_hash_key(tx)
        for context_id, text in texts.items():
            if not text_matches_hash(text, hashes[context_id], key):
                raise InvalidRecord(
                    "text_hash_mismatch",
                    f"the text given for {context_id} does not hash to its content_hash",
                )
        return await privacy.capture(tx, texts, {i: records[i].kind for i in texts})
