"""Hand-off verification: is each statement an agent or LLM made borne out by its parents?

A summary, reasoning step, plan or tool result is split into statements (sentences and lines,
as answers are); each statement is judged against the captured texts of the record's parents
(or a caller's resolver, hash-checked). Per statement, one verdict:

- `supported`: one parent's text entails it, or several together that come from one source;
- `cross_source_merge`: only parents from *different root documents* entail it together, and
  no single one does: the statement fuses sources (the verdict names the parents it fused and
  their sources). This is how a stale cross-reference and a fact about another group become
  one wrong "fact";
- `unsupported`: every parent's text was judged and together they do not entail it;
- `unknown`: the judge could not decide, or a text is unavailable.

The first three but `supported` are failing. Each verdict is appended through derive() as a
`verdict` record whose one parent is the record, with `check: statement`, the statement's index
and character span (never its text). The current verdict per (record, statement, judge) is
the newest decisive one, else the newest unknown (sql/statement_verdicts.sql).

`verify_any` verifies any LLM-made record: answers and claims through lineage.claims.verify,
the others here.
"""

import asyncio
import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from lineage.claims.answers import _sentences, claim_hypothesis
from lineage.claims.judges import Judge, OfflineJudge
from lineage.claims.verify import (
    ClaimsVerification,
    TextResolver,
    _call,
    _judge,
    context_text_resolver,
    verify_claims,
)
from lineage.core.derive import Derivation, derive_many
from lineage.core.errors import BadParameter, NotFound
from lineage.core.hashing import text_matches_hash
from lineage.core.record import ContextRecord
from lineage.db.database import Database, Transaction
from lineage.services import reads
from lineage.services.privacy import text_hash_key
from lineage.services.records import get_records
from lineage.services.transaction_store import TransactionStore

__all__ = [
    "HANDOFF_KINDS",
    "HandoffVerification",
    "StatementVerdict",
    "current_statement_verdicts",
    "verdict_history",
    "verify_any",
    "verify_command",
    "verify_handoff",
]

HANDOFF_KINDS: Final = frozenset({"summary", "reasoning", "plan", "tool_call"})
CLAIM_KINDS: Final = frozenset({"claim", "answer"})
Outcome = Literal["supported", "unsupported", "cross_source_merge", "unknown"]
FAILING: Final = frozenset({"unsupported", "cross_source_merge"})
VERIFY_TRANSFORM: Final = "verify_statements"
VERIFY_VERSION: Final = "1"
MAX_REASON_CHARS: Final = 1000
MAX_STATEMENTS: Final = 50
# Past this many parents, which of them a statement fused is not worked out one by one.
MAX_FUSION_PARENTS: Final = 8
MAX_ROOT_DEPTH: Final = 50


@dataclass(frozen=True)
class StatementVerdict:
    statement: int
    span: tuple[int, int]
    verdict: Outcome
    reason: str
    merged_ids: list[str] = field(default_factory=list)
    merged_sources: list[str] = field(default_factory=list)
    verdict_id: str = ""

    @property
    def failing(self) -> bool:
        return self.verdict in FAILING

    # Sent with `failing`, which no field holds, and the span as a list.
    def as_dict(self) -> dict[str, Any]:
        return {
            "statement": self.statement,
            "span": list(self.span),
            "verdict": self.verdict,
            "failing": self.failing,
            "reason": self.reason,
            "merged_ids": self.merged_ids,
            "merged_sources": self.merged_sources,
            "verdict_id": self.verdict_id,
        }


@dataclass(frozen=True)
class HandoffVerification:
    context_id: str
    kind: str
    judge: str
    judge_version: str
    parent_ids: list[str]
    statements: list[StatementVerdict] = field(default_factory=list)
    unavailable: str = ""  # why nothing was judged, when nothing was
    text: str = ""  # the text judged, to quote each statement in `lines` (never sent)

    @property
    def failing(self) -> list[StatementVerdict]:
        return [s for s in self.statements if s.failing]

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(("supported", "unsupported", "cross_source_merge", "unknown"), 0)
        for statement in self.statements:
            counts[statement.verdict] += 1
        return counts

    # Sent as the API's Verification: counts, the number failing and the links to the cause.
    def as_dict(self) -> dict[str, Any]:
        return {
            "context_id": self.context_id,
            "kind": self.kind,
            "judge": self.judge,
            "judge_version": self.judge_version,
            "parent_ids": self.parent_ids,
            "counts": self.counts(),
            "failing": len(self.failing),
            "statements": [s.as_dict() for s in self.statements],
            "unavailable": self.unavailable or None,
            "lineage": f"/v1/contexts/{self.context_id}/lineage",
            "suspicious": f"/v1/contexts/{self.context_id}/suspicious",
        }

    def lines(self) -> list[str]:
        """Plain text for the CLI and the demo: one line per statement, failing ones marked."""
        parents = ", ".join(self.parent_ids)
        lines = [
            f"{self.context_id} ({self.kind}, from {parents}): "
            f"judged by {self.judge}@{self.judge_version}"
        ]
        if self.unavailable:
            lines.append(f"  not judged: {self.unavailable}")
        for s in self.statements:
            mark = "FAIL" if s.failing else "ok  "
            quoted = f' "{self.text[s.span[0] : s.span[1]]}"' if self.text else ""
            lines.append(f"  {mark} statement {s.statement}{quoted} {s.verdict}: {s.reason}")
        counts = ", ".join(f"{k} {v}" for k, v in self.counts().items() if v)
        lines.append(
            f"  {len(self.failing)} of {len(self.statements)} statements failing"
            f" ({counts or 'none judged'})"
        )
        return lines


@dataclass(frozen=True)
class _Parent:
    context_id: str
    text: str
    sources: tuple[str, ...]  # the source_uri (or id) of each root document it derives from


async def _roots(tx: Transaction, context_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
    rows = await tx.fetch("parent_roots", context_ids=list(context_ids), max_depth=MAX_ROOT_DEPTH)
    found: dict[str, set[str]] = {i: set() for i in context_ids}
    for row in rows:
        found[row["context_id"]].add(row["source_uri"] or row["root_id"])
    return {i: tuple(sorted(s)) for i, s in found.items()}


async def _entails(judge: Judge, parents: Sequence[_Parent], hypothesis: str) -> bool:
    together = "\n\n".join(p.text for p in parents)
    return (await _judge(judge, together, hypothesis)).outcome == "entailed"


async def _statement_verdict(
    judge: Judge, parents: Sequence[_Parent], complete: bool, hypothesis: str
) -> tuple[Outcome, str, list[_Parent]]:
    """Supported by one parent alone; else by all together, then fused or not; else not."""
    for parent in parents:
        alone = await _judge(judge, parent.text, hypothesis)
        if alone.outcome == "entailed":
            return "supported", f"{parent.context_id}: {alone.reason}", [parent]
    together = await _judge(judge, "\n\n".join(p.text for p in parents), hypothesis)
    if together.outcome == "entailed":
        fused = list(parents)
        if len(parents) <= MAX_FUSION_PARENTS:
            # A parent is fused in when the others alone no longer entail the statement.
            needed = [
                p
                for p in parents
                if not await _entails(judge, [q for q in parents if q is not p], hypothesis)
            ]
            fused = needed or fused
        sources = sorted({s for p in fused for s in p.sources})
        ids = ", ".join(p.context_id for p in fused)
        if len(sources) > 1:
            return (
                "cross_source_merge",
                f"no single parent says it; only {ids} together do, and they come from "
                f"different documents ({', '.join(sources)}): {together.reason}",
                fused,
            )
        return "supported", f"{ids} together: {together.reason}", fused
    ids = ", ".join(p.context_id for p in parents)
    if together.outcome == "not_entailed" and complete:
        return "unsupported", f"{ids}: {together.reason}", []
    if together.outcome == "not_entailed":
        return "unknown", f"{together.reason} (but some parent text is unavailable)", []
    return "unknown", together.reason, []


async def verify_handoff(
    database: Database,
    tenant_id: str,
    context_id: str,
    judge: Judge,
    resolver: TextResolver | None = None,
    *,
    concurrency: int = 8,
) -> HandoffVerification:
    """Judge each statement of an LLM-made record against its parents and append one verdict
    per statement. Texts come from `resolver` (default: context_text), each checked against its
    record's content_hash. Raises NotFound for an unknown id, BadParameter for a kind that is
    not a hand-off."""
    default = context_text_resolver(database, tenant_id)
    chosen = resolver or default
    async with database.tenant(tenant_id) as tx:
        record = (await get_records(tx, [context_id])).get(context_id)
        if record is None:
            raise NotFound(f"no context {context_id}")
        if record.kind not in HANDOFF_KINDS:
            raise BadParameter(
                f"{context_id} is a {record.kind}; hand-offs are {', '.join(sorted(HANDOFF_KINDS))}"
            )
        parents = await get_records(tx, record.parent_ids)
        roots = await _roots(tx, list(parents))
        key = await text_hash_key(tx)
    records = {context_id: record, **parents}
    texts = await _checked_texts(chosen, records, list(records), key)
    if resolver is not None:
        missing = [i for i in records if i not in texts]
        texts |= await _checked_texts(default, records, missing, key)
    result = HandoffVerification(
        context_id, record.kind, judge.name, judge.version, list(record.parent_ids)
    )
    text = texts.get(context_id)
    available = [_Parent(p, texts[p], roots.get(p, ())) for p in record.parent_ids if p in texts]
    if text is None:
        return dataclasses.replace(
            result, unavailable="its text is unavailable: capture it or send it in premise_texts"
        )
    if not available:
        return dataclasses.replace(
            result, unavailable=f"no parent text available for {', '.join(record.parent_ids)}"
        )
    spans = _sentences(text)
    if len(spans) > MAX_STATEMENTS:
        raise BadParameter(
            f"{context_id} has {len(spans)} statements; at most {MAX_STATEMENTS} are verified "
            "at once (verify its parts, or send a shorter record)"
        )
    complete = len(available) == len(record.parent_ids)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(index: int, span: tuple[int, int]) -> StatementVerdict:
        async with gate:
            hypothesis = claim_hypothesis(text[span[0] : span[1]])
            outcome, reason, fused = await _statement_verdict(
                judge, available, complete, hypothesis
            )
        short = reason if len(reason) <= MAX_REASON_CHARS else reason[:MAX_REASON_CHARS] + "…"
        merged = [p.context_id for p in fused] if outcome == "cross_source_merge" else []
        sources = sorted({s for p in fused for s in p.sources}) if merged else []
        return StatementVerdict(index, span, outcome, short, merged, sources)

    verdicts = await asyncio.gather(*(one(i, span) for i, span in enumerate(spans)))
    recorded = await _append(database, tenant_id, record, judge, verdicts)
    return dataclasses.replace(result, statements=recorded, text=text)


async def _checked_texts(
    resolver: TextResolver, records: Mapping[str, ContextRecord], ids: Sequence[str], key: bytes
) -> dict[str, str]:
    found = await _call(resolver, ids) if ids else {}
    return {i: t for i, t in found.items() if text_matches_hash(t, records[i].content_hash, key)}


async def _append(
    database: Database,
    tenant_id: str,
    record: ContextRecord,
    judge: Judge,
    verdicts: Sequence[StatementVerdict],
) -> list[StatementVerdict]:
    items = []
    for verdict in verdicts:
        attributes = {
            "check": "statement",
            "statement": verdict.statement,
            "span": list(verdict.span),
            "verdict": verdict.verdict,
            "judge": judge.name,
            "judge_version": judge.version,
            "reason": verdict.reason,
            "merged_ids": verdict.merged_ids,
            "merged_sources": verdict.merged_sources,
        }
        items.append(
            Derivation(
                [record.context_id],
                json.dumps(attributes | {"record_id": record.context_id}, sort_keys=True),
                "verdict",
                VERIFY_TRANSFORM,
                VERIFY_VERSION,
                trace_id=record.trace_id,
                attributes=attributes,
            )
        )
    if not items:
        return []
    async with database.tenant(tenant_id) as tx:
        made = await derive_many(TransactionStore(tx), items)
    return [
        dataclasses.replace(verdict, verdict_id=context.context_id)
        for verdict, context in zip(verdicts, made, strict=True)
    ]


async def current_statement_verdicts(
    database: Database, tenant_id: str, context_ids: Sequence[str]
) -> list[dict[str, Any]]:
    """The current verdict per (record, statement, judge), in statement order."""
    async with database.tenant(tenant_id) as tx:
        rows = await tx.fetch("statement_verdicts", context_ids=list(context_ids))
    nodes = [reads.node_from_row(row) for row in rows]
    return sorted(nodes, key=lambda n: (n["record_id"], n["statement"], n["judge"]))


async def verdict_history(
    database: Database, tenant_id: str, context_ids: Sequence[str]
) -> list[dict[str, Any]]:
    """Every verdict on these records, current or not, newest first per record."""
    async with database.tenant(tenant_id) as tx:
        rows = await tx.fetch("verdict_history", context_ids=list(context_ids))
    return [reads.node_from_row(row) for row in rows]


async def record_kind(database: Database, tenant_id: str, context_id: str) -> str:
    async with database.tenant(tenant_id) as tx:
        record = (await get_records(tx, [context_id])).get(context_id)
    if record is None:
        raise NotFound(f"no context {context_id}")
    return record.kind


async def verify_any(
    database: Database,
    tenant_id: str,
    context_id: str,
    judge: Judge,
    resolver: TextResolver | None = None,
    *,
    claim_texts: Mapping[str, str] | None = None,
) -> ClaimsVerification | HandoffVerification:
    """Verify any record an LLM or agent made: an answer's or a claim's claims against what
    they cite, a hand-off's statements against its parents."""
    kind = await record_kind(database, tenant_id, context_id)
    if kind in CLAIM_KINDS:
        return await verify_claims(
            database, tenant_id, context_id, judge, resolver, claim_texts=claim_texts
        )
    if claim_texts:
        raise BadParameter(f"claim_texts is for answers and claims; {context_id} is a {kind}")
    if kind in HANDOFF_KINDS:
        return await verify_handoff(database, tenant_id, context_id, judge, resolver)
    made = ", ".join(sorted(CLAIM_KINDS | HANDOFF_KINDS))
    raise BadParameter(f"{context_id} is a {kind}; only records a model or agent made ({made})")


async def verify_command(
    database: Database, tenant_id: str, context_id: str, judge: Judge | None = None
) -> ClaimsVerification | HandoffVerification:
    """`lineage verify ID`: verify any LLM-made record with texts from context_text."""
    return await verify_any(database, tenant_id, context_id, judge or OfflineJudge())
