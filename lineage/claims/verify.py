"""Claim verification: is each claim of an answer cited, cited from its prompt, and entailed?

Per claim, one verdict:

- `uncited`: the claim cites no id;
- `hallucinated_id`: it cites an id that was not in its prompt (invented, or another tenant's:
  only prompt membership is checked, so nothing about the id's existence is revealed);
- `unsupported`: the judge finds the cited text does not entail the claim;
- `supported`: the judge finds it does (one cited text alone, or all of them together);
- `unknown`: the judge could not decide, or the claim or premise text is unavailable.

The first three are failing. A claim's prompt is its parent of kind `prompt`; a claim recorded
without one (as in the demo) is checked against its own parents. Texts never come from
provenance: the claim text from `claim_texts` (checked against the claim's content hash), else
the resolver, else context_text; the premise text from the resolver (default: context_text),
only ever asked for ids that were in the prompt. A text that does not hash to its record's
content_hash is treated as unavailable.

Each verdict is appended through derive() as a `verdict` record whose one parent is the claim;
re-verifying appends new verdicts; per (claim, judge) the current one is the newest decisive
verdict (anything but `unknown`), else the newest `unknown` (sql/claim_verdicts.sql), so a rerun
that cannot see the texts never hides what an earlier run found. sql/claims_by_produced_by.sql
reports failing rates over time.
"""

import asyncio
import dataclasses
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

import asyncpg

from lineage.claims.answers import claim_hypothesis
from lineage.claims.judges import Judge, Judgement
from lineage.core.derive import Derivation, derive_many
from lineage.core.errors import BadParameter, NotFound
from lineage.core.hashing import text_matches_hash
from lineage.core.record import ContextRecord
from lineage.db.database import Database
from lineage.services import reads
from lineage.services.privacy import text_hash_key
from lineage.services.records import get_records
from lineage.services.transaction_store import TransactionStore
from lineage.settings import Settings

__all__ = [
    "FAILING",
    "ClaimVerdict",
    "ClaimsVerification",
    "TextResolver",
    "Verdict",
    "bucket_label",
    "check_bucket",
    "claims_report",
    "context_text_resolver",
    "current_verdicts",
    "ensure_verified",
    "mapping_resolver",
    "report_table",
    "verify_claims",
]

Verdict = Literal["uncited", "hallucinated_id", "unsupported", "supported", "unknown"]
FAILING: Final = frozenset({"uncited", "hallucinated_id", "unsupported"})
VERIFY_TRANSFORM: Final = "verify_claims"
VERIFY_VERSION: Final = "1"
MAX_REASON_CHARS: Final = 1000
# Interval words date_bin accepts: months and years have no fixed length, so they cannot bin.
_BUCKET = re.compile(
    r"^\s*0*[1-9]\d{0,5}\s*(microsecond|millisecond|second|sec|minute|min|hour|hr|day|week)s?\s*$",
    re.IGNORECASE,
)
GROUP_BYS: Final = ("produced_by",)

# Ids in, texts out; ids it does not know are simply left out. May be sync or async.
TextResolver = Callable[[Sequence[str]], Awaitable[Mapping[str, str]] | Mapping[str, str]]


def context_text_resolver(database: Database, tenant_id: str) -> TextResolver:
    """Texts captured in context_text for this tenant (opt-in; see capture_texts)."""

    async def resolve(context_ids: Sequence[str]) -> Mapping[str, str]:
        if not context_ids:
            return {}
        async with database.tenant(tenant_id) as tx:
            rows = await tx.fetch("claim_text", context_ids=list(context_ids))
        return {row["context_id"]: row["text"] for row in rows}

    return resolve


def mapping_resolver(
    texts: Mapping[str, str], fallback: TextResolver | None = None
) -> TextResolver:
    """Texts from a mapping, the rest from `fallback` (e.g. context_text)."""

    async def resolve(context_ids: Sequence[str]) -> Mapping[str, str]:
        found = {i: texts[i] for i in context_ids if i in texts}
        rest = [i for i in context_ids if i not in found]
        if rest and fallback is not None:
            found |= await _call(fallback, rest)
        return found

    return resolve


async def _call(resolver: TextResolver, context_ids: Sequence[str]) -> dict[str, str]:
    result = resolver(context_ids)
    texts = await result if inspect.isawaitable(result) else result
    return {k: v for k, v in texts.items() if k in context_ids and isinstance(v, str)}


@dataclass(frozen=True)
class ClaimVerdict:
    claim_id: str
    verdict: Verdict
    reason: str
    cited_ids: list[str]
    hallucinated_ids: list[str]
    judge: str
    judge_version: str
    verdict_id: str = ""

    @property
    def failing(self) -> bool:
        return self.verdict in FAILING

    # Sent with `failing` and the links from verdict to cause, which no field holds.
    def as_dict(self) -> dict[str, Any]:
        return {
            "claim_id": self.claim_id,
            "verdict": self.verdict,
            "failing": self.failing,
            "reason": self.reason,
            "cited_ids": self.cited_ids,
            "hallucinated_ids": self.hallucinated_ids,
            "judge": self.judge,
            "judge_version": self.judge_version,
            "verdict_id": self.verdict_id,
            # From verdict to cause: the claim's walk-back and its suspicious hops.
            "lineage": f"/v1/contexts/{self.claim_id}/lineage",
            "suspicious": f"/v1/contexts/{self.claim_id}/suspicious",
        }


@dataclass(frozen=True)
class ClaimsVerification:
    """An answer's (or one claim's) claims with their verdicts; a hand-off's statements are a
    HandoffVerification (lineage.claims.handoffs)."""

    context_id: str
    judge: str
    judge_version: str
    claims: list[ClaimVerdict] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(
            ("uncited", "hallucinated_id", "unsupported", "supported", "unknown"), 0
        )
        for claim in self.claims:
            counts[claim.verdict] += 1
        return counts

    @property
    def failing(self) -> list[ClaimVerdict]:
        return [claim for claim in self.claims if claim.failing]

    # Sent as the API's Verification: counts and the number failing, each claim as it is sent.
    def as_dict(self) -> dict[str, Any]:
        return {
            "context_id": self.context_id,
            "judge": self.judge,
            "judge_version": self.judge_version,
            "counts": self.counts(),
            "failing": len(self.failing),
            "claims": [claim.as_dict() for claim in self.claims],
        }

    def lines(self) -> list[str]:
        """Plain text for the CLI and the demo: one line per claim, failing ones marked."""
        lines = [f"{self.context_id}: judged by {self.judge}@{self.judge_version}"]
        for claim in self.claims:
            mark = "FAIL" if claim.failing else "ok  "
            cited = ", ".join(claim.cited_ids) or "no ids"
            lines.append(
                f"  {mark} {claim.claim_id} {claim.verdict} (cites {cited}): {claim.reason}"
            )
            if claim.failing or claim.verdict == "unknown":
                lines.append(f"       walk back: lineage walk {claim.claim_id}")
        counts = ", ".join(f"{k} {v}" for k, v in self.counts().items() if v)
        lines.append(
            f"  {len(self.failing)} of {len(self.claims)} failing ({counts or 'no claims'})"
        )
        return lines


@dataclass(frozen=True)
class _Claim:
    record: ContextRecord
    scope: frozenset[str]  # the ids that were in the claim's prompt
    prompt_ids: frozenset[str]

    @property
    def cited_ids(self) -> list[str]:
        """attributes.cited_ids, else .supported_by, else the parents that are not its prompt."""
        attributes = self.record.attributes
        cited = attributes.get("cited_ids", attributes.get("supported_by"))
        if not isinstance(cited, list):
            return [p for p in self.record.parent_ids if p not in self.prompt_ids]
        return [c if isinstance(c, str) else json.dumps(c) for c in cited]


async def _claims_of(database: Database, tenant_id: str, context_id: str) -> list[_Claim]:
    """The claims of an answer (in the answer's order) or the one claim named, with scopes."""
    async with database.tenant(tenant_id) as tx:
        target = (await get_records(tx, [context_id])).get(context_id)
        if target is None:
            raise NotFound(f"no context {context_id}")
        if target.kind == "claim":
            records = [target]
        elif target.kind == "answer":
            parents = await get_records(tx, target.parent_ids)
            records = [parents[p] for p in target.parent_ids if parents[p].kind == "claim"]
        else:
            raise BadParameter(f"{context_id} is a {target.kind}; verify an answer or a claim")
        up = await get_records(tx, sorted({p for r in records for p in r.parent_ids}))
    claims = []
    for record in records:
        prompts = [up[p] for p in record.parent_ids if up[p].kind == "prompt"]
        scope = (
            {i for prompt in prompts for i in prompt.parent_ids}
            if prompts
            else set(record.parent_ids)
        )
        claims.append(_Claim(record, frozenset(scope), frozenset(p.context_id for p in prompts)))
    return claims


async def _judge(judge: Judge, premise: str, hypothesis: str) -> Judgement:
    try:
        return await judge.judge(premise, hypothesis)
    except Exception as exc:
        # A judge that breaks has not decided; the run goes on for the other claims.
        return Judgement(
            "unknown", f"judge failed: {type(exc).__name__}: {exc}", judge.name, judge.version
        )


async def _entailment(
    judge: Judge, premises: Mapping[str, str], hypothesis: str, complete: bool
) -> tuple[Verdict, str]:
    """Supported if one cited text, or all together, entail the claim; unsupported only when
    every cited text was judged and none did."""
    ids = list(premises)
    together = await _judge(judge, "\n\n".join(premises.values()), hypothesis)
    if together.outcome == "entailed":
        return "supported", f"{', '.join(ids)}: {together.reason}"
    if len(ids) > 1:
        for context_id, premise in premises.items():
            alone = await _judge(judge, premise, hypothesis)
            if alone.outcome == "entailed":
                return "supported", f"{context_id}: {alone.reason}"
    if together.outcome == "not_entailed" and complete:
        return "unsupported", f"{', '.join(ids)}: {together.reason}"
    if together.outcome == "not_entailed":
        return "unknown", f"{together.reason} (but some cited text is unavailable)"
    return "unknown", together.reason


async def _verdict(
    claim: _Claim, judge: Judge, claim_text: str | None, premises: Mapping[str, str]
) -> ClaimVerdict:
    cited = claim.cited_ids
    outside = [c for c in cited if c not in claim.scope]

    def verdict(outcome: Verdict, reason: str) -> ClaimVerdict:
        short = reason if len(reason) <= MAX_REASON_CHARS else reason[:MAX_REASON_CHARS] + "…"
        return ClaimVerdict(
            claim.record.context_id, outcome, short, cited, outside, judge.name, judge.version
        )

    if not cited:
        return verdict("uncited", "the claim cites no context id")
    if outside:
        return verdict(
            "hallucinated_id", f"cites ids that were not in its prompt: {', '.join(outside)}"
        )
    if claim_text is None:
        return verdict("unknown", "claim text unavailable: capture it or send it in claim_texts")
    available = {c: premises[c] for c in cited if c in premises}
    if not available:
        return verdict("unknown", f"no cited text available for {', '.join(cited)}")
    outcome, reason = await _entailment(
        judge, available, claim_hypothesis(claim_text), len(available) == len(cited)
    )
    return verdict(outcome, reason)


async def _texts(
    resolver: TextResolver, records: Mapping[str, ContextRecord], ids: Sequence[str], key: bytes
) -> dict[str, str]:
    """Resolved texts that hash to their record's content_hash; the others are unavailable."""
    found = await _call(resolver, ids) if ids else {}
    return {i: t for i, t in found.items() if text_matches_hash(t, records[i].content_hash, key)}


async def verify_claims(
    database: Database,
    tenant_id: str,
    answer_id: str,
    judge: Judge,
    resolver: TextResolver | None = None,
    *,
    claim_texts: Mapping[str, str] | None = None,
    concurrency: int = 8,
) -> ClaimsVerification:
    """Verify every claim of an answer (or one claim) and append one verdict record per claim.

    `resolver` gives premise texts by id (default: context_text); `claim_texts` gives claim
    texts by claim id, each of which must hash to its claim's content_hash (else BadParameter).
    Judges run `concurrency` claims at a time, outside any transaction. Raises NotFound for an
    unknown id, BadParameter for a record that is not an answer or a claim.
    """
    default = context_text_resolver(database, tenant_id)
    premise_resolver = resolver or default
    claims = await _claims_of(database, tenant_id, answer_id)
    async with database.tenant(tenant_id) as tx:
        key = await text_hash_key(tx)  # claims' hashes are keyed
    by_id = {c.record.context_id: c.record for c in claims}
    given = dict(claim_texts or {})
    for claim_id, text in given.items():
        if claim_id not in by_id:
            raise BadParameter(f"claim_texts names {claim_id}, which is not a claim of {answer_id}")
        if not text_matches_hash(text, by_id[claim_id].content_hash, key):
            raise BadParameter(f"claim_texts[{claim_id}] does not hash to the claim's content_hash")
    wanted = [i for i in by_id if i not in given]
    claim_text = given | await _texts(premise_resolver, by_id, wanted, key)
    if resolver is not None:
        claim_text |= await _texts(default, by_id, [i for i in wanted if i not in claim_text], key)

    # Only ids that were in a prompt are ever resolved: an outside id is never looked up.
    cited = sorted({i for c in claims if not set(c.cited_ids) - c.scope for i in c.cited_ids})
    async with database.tenant(tenant_id) as tx:
        cited_records = await get_records(tx, cited)
    premises = await _texts(
        premise_resolver, cited_records, [i for i in cited if i in cited_records], key
    )

    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(claim: _Claim) -> ClaimVerdict:
        async with gate:
            return await _verdict(claim, judge, claim_text.get(claim.record.context_id), premises)

    verdicts = await asyncio.gather(*(one(claim) for claim in claims))
    recorded = await _append_verdicts(database, tenant_id, answer_id, claims, verdicts)
    return ClaimsVerification(answer_id, judge.name, judge.version, recorded)


async def _append_verdicts(
    database: Database,
    tenant_id: str,
    answer_id: str,
    claims: Sequence[_Claim],
    verdicts: Sequence[ClaimVerdict],
) -> list[ClaimVerdict]:
    items = []
    for claim, verdict in zip(claims, verdicts, strict=True):
        attributes = {
            "check": "claim",
            "verdict": verdict.verdict,
            "judge": verdict.judge,
            "judge_version": verdict.judge_version,
            "reason": verdict.reason,
            "cited_ids": verdict.cited_ids,
            "hallucinated_ids": verdict.hallucinated_ids,
            "verified_from": answer_id,
        }
        items.append(
            Derivation(
                [claim.record.context_id],
                json.dumps(attributes | {"claim_id": claim.record.context_id}, sort_keys=True),
                "verdict",
                VERIFY_TRANSFORM,
                VERIFY_VERSION,
                trace_id=claim.record.trace_id,
                attributes=attributes,
            )
        )
    if not items:
        return []
    async with database.tenant(tenant_id) as tx:
        records = await derive_many(TransactionStore(tx), items)
    return [
        dataclasses.replace(verdict, verdict_id=record.context_id)
        for verdict, record in zip(verdicts, records, strict=True)
    ]


async def current_verdicts(
    database: Database, tenant_id: str, context_id: str
) -> list[dict[str, Any]]:
    """The current verdict per (claim, judge) for an answer's claims, or for one claim."""
    claims = await _claims_of(database, tenant_id, context_id)
    return [reads.node_from_row(row) for row in await _verdict_rows(database, tenant_id, claims)]


async def _verdict_rows(
    database: Database, tenant_id: str, claims: Sequence[_Claim]
) -> list[asyncpg.Record]:
    async with database.tenant(tenant_id) as tx:
        return await tx.fetch(
            "claim_verdicts",
            context_ids=[c.record.context_id for c in claims],
        )


async def ensure_verified(
    database: Database,
    tenant_id: str,
    context_id: str,
    judge: Judge,
    resolver: TextResolver | None = None,
) -> ClaimsVerification:
    """The current verdicts when this judge (same version) has one for every claim, else a new
    verification: running it again appends nothing (the demo stays a replay)."""
    claims = await _claims_of(database, tenant_id, context_id)
    rows = await _verdict_rows(database, tenant_id, claims)
    mine = {
        row["claim_id"]: row
        for row in rows
        if row["judge"] == judge.name and row["judge_version"] == judge.version
    }
    if not claims or any(c.record.context_id not in mine for c in claims):
        return await verify_claims(database, tenant_id, context_id, judge, resolver)
    verdicts = [
        ClaimVerdict(
            row["claim_id"], row["verdict"], row["reason"], list(row["cited_ids"] or []),
            list(row["hallucinated_ids"] or []), judge.name, judge.version, row["context_id"],
        )
        for row in (mine[c.record.context_id] for c in claims)
    ]  # fmt: skip
    return ClaimsVerification(context_id, judge.name, judge.version, verdicts)


def check_bucket(bucket: str) -> str:
    if not _BUCKET.fullmatch(bucket):
        raise BadParameter(
            f"bucket {bucket[:40]!r} must be a positive interval of fixed length such as "
            "'1 hour', '1 day' or '7 days' (months and years cannot bin)"
        )
    return bucket.strip()


def _since(since: datetime | str) -> datetime:
    if isinstance(since, datetime):
        return since
    try:
        return datetime.fromisoformat(since)
    except ValueError as exc:
        raise BadParameter(f"since {since[:40]!r} is not an ISO 8601 date or time") from exc


async def claims_report(
    database: Database,
    settings: Settings,
    tenant_id: str,
    since: datetime | str | None = None,
    bucket: str = "1 day",
    group_by: str = "produced_by",
) -> list[dict[str, Any]]:
    """`lineage report claims`: failing rates per bucket, produced_by and judge, from the
    current verdicts of claims recorded since `since` (default: the last 30 days)."""
    if group_by not in GROUP_BYS:
        raise BadParameter(f"group_by {group_by!r}: only {', '.join(GROUP_BYS)} is supported")
    start = _since(since) if since else datetime.now(UTC) - timedelta(days=30)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    return await reads.run(
        database,
        settings,
        "claims_by_produced_by",
        tenant_id=tenant_id,
        since=start,
        bucket=check_bucket(bucket),
    )


def bucket_label(start: object) -> str:
    """A bucket's start as a report shows it: the day, and the minute unless it is midnight."""
    text = str(start).replace("T", " ")
    return text[:10] if text[11:19] in ("", "00:00:00") else text[:16]


def report_table(rows: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, ...], list[list[str]]]:
    """The report's header and cells, one row per bucket, produced_by and judge."""
    header = ("bucket", "produced_by", "judge", "claims", "failing", "rate")
    cells = [
        [bucket_label(row["bucket_start"]), row["produced_by"] or "(none)", str(row["judge"]),
         str(row["claims"]), str(row["failing"]), f"{row['failing_rate']:.2f}"]
        for row in rows
    ]  # fmt: skip
    return header, cells
