"""Answers, claims and hand-offs: ingest a model's output, verify what a model or agent made
(an answer's claims, a summary's statements), list verdicts with their history, report drift.

Recording a verdict needs a key with the `verify` scope; reading verdicts needs `read`.

The judge is `app.state.claim_judge` when the deployment sets one (any `Judge`), else the one
LINEAGE_CLAIM_JUDGE names (lineage.claims.judges.plugins: offline, openai or an entry point).
"""

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from lineage.api import models
from lineage.api.deps import (
    AppSettings,
    Db,
    Ingest,
    IsoTime,
    Read,
    ReadDb,
    SentTraceId,
    Verify,
)
from lineage.api.results import Json
from lineage.claims.answers import AnswerRecorded, store_answer
from lineage.claims.drift import drift_report
from lineage.claims.handoffs import (
    current_statement_verdicts,
    record_kind,
    verdict_history,
    verify_any,
)
from lineage.claims.judges import Judge, judge_from_settings
from lineage.claims.verify import (
    claims_report,
    context_text_resolver,
    current_verdicts,
    mapping_resolver,
)
from lineage.db.database import Database

router = APIRouter(tags=["answers"])


def get_judge(request: Request) -> Judge:
    """`app.state.claim_judge` when the deployment set one, else the one the settings name
    (LINEAGE_CLAIM_JUDGE), built once."""
    judge: Judge | None = getattr(request.app.state, "claim_judge", None)
    if judge is None:
        judge = judge_from_settings(request.app.state.settings)
        request.app.state.claim_judge = judge
    return judge


class AnswerIn(BaseModel):
    """A model's output for a recorded prompt (see lineage.claims.answers for every shape)."""

    model_config = ConfigDict(extra="forbid")

    prompt_id: str
    output: dict[str, Any] = Field(
        description='{"claims": [{"text": ..., "supported_by": [ids]}]}, {"text": "... [id]"}, '
        'Anthropic {"content": [...]} or OpenAI responses {"output": [...]}'
    )
    produced_by: str | None = None
    model: str | None = None
    trace_id: str | None = Field(
        default=None, description="defaults to the request's trace id header, else the prompt's"
    )
    answer_id: str | None = Field(
        default=None, description="name the answer to make a replay a no-op (200)"
    )
    file_ids: dict[str, str] = Field(
        default_factory=dict, description="OpenAI file_id -> context id, for file_citation"
    )
    capture_text: StrictBool = Field(
        default=False, description="opt in: keep claim and answer texts in context_text"
    )


class VerifyIn(BaseModel):
    """Texts the server may not hold. Each must hash to its record's content_hash."""

    model_config = ConfigDict(extra="forbid")

    claim_texts: dict[str, str] = Field(
        default_factory=dict, description="claim id -> claim text, when it was not captured"
    )
    premise_texts: dict[str, str] = Field(
        default_factory=dict,
        description="context id -> text, for cited contexts, or for a hand-off and its parents; "
        "ids not given come from context_text",
    )

    @model_validator(mode="after")
    def texts_are_unicode(self) -> "VerifyIn":
        """A lone surrogate is not text: it could not be hashed, so it is refused, not judged."""
        for texts in (self.claim_texts, self.premise_texts):
            for key, text in texts.items():
                if not (key + text).isascii():
                    try:
                        (key + text).encode()
                    except UnicodeEncodeError as exc:
                        raise ValueError(
                            f"{key!r}: a lone UTF-16 surrogate is not text (unpaired_surrogate)"
                        ) from exc
        return self


@router.post(
    "/v1/answers",
    status_code=201,
    responses={200: {"model": AnswerRecorded, "description": models.REPLAY}},
    response_model=AnswerRecorded,
)
async def post_answer(
    body: AnswerIn, request: Request, database: Db, caller: Ingest, sent_trace_id: SentTraceId
) -> Json:
    """Record one claim per claim and an answer over them, in one transaction. Cited ids not in
    the prompt are kept in the claim's `cited_ids` and never become edges. 404 for an unknown
    prompt."""
    recorded = await store_answer(
        database,
        caller.tenant_id,
        body.prompt_id,
        body.output,
        body.produced_by,
        body.model,
        body.trace_id or sent_trace_id,
        answer_id=body.answer_id,
        file_ids=body.file_ids,
        capture_text=body.capture_text,
    )
    if recorded.created:
        request.app.state.sampler.offer(caller.tenant_id, [(recorded.answer.context_id, "answer")])
    return Json(recorded.model_dump(mode="json"), status_code=201 if recorded.created else 200)


@router.post(
    "/v1/answers/{answer_id}/verify",
    response_model=models.Verification,
    response_model_exclude_unset=True,
)
async def verify_answer(
    answer_id: str, request: Request, database: Db, caller: Verify, body: VerifyIn | None = None
) -> dict[str, Any]:
    """Judge each claim (an answer's, or one claim's) and append a verdict record per claim.
    Each claim links to its walk-back (`lineage`) and suspicious hops."""
    return await _verify(answer_id, request, database, caller.tenant_id, body)


@router.post(
    "/v1/contexts/{context_id}/verify",
    response_model=models.Verification,
    response_model_exclude_unset=True,
)
async def verify_context(
    context_id: str, request: Request, database: Db, caller: Verify, body: VerifyIn | None = None
) -> dict[str, Any]:
    """Verify any record a model or agent made: an answer's or claim's claims against what they
    cite; a summary's, reasoning step's, plan's or tool result's statements against its parents
    (`cross_source_merge` when only parents from different documents say it together)."""
    return await _verify(context_id, request, database, caller.tenant_id, body)


async def _verify(
    context_id: str, request: Request, database: Database, tenant_id: str, body: VerifyIn | None
) -> dict[str, Any]:
    given = body or VerifyIn()
    default = context_text_resolver(database, tenant_id)
    resolver = mapping_resolver(given.premise_texts, default) if given.premise_texts else None
    verification = await verify_any(
        database, tenant_id, context_id, get_judge(request), resolver, claim_texts=given.claim_texts
    )
    return verification.as_dict()


@router.get("/v1/answers/{answer_id}/verdicts", response_model=models.Verdicts)
async def get_verdicts(answer_id: str, database: ReadDb, caller: Read) -> dict[str, Any]:
    """The current verdict per (claim, judge) and every verdict recorded (`history`, newest
    first). Current: the newest decisive verdict, else the newest unknown."""
    verdicts = await current_verdicts(database, caller.tenant_id, answer_id)
    claim_ids = sorted({v["claim_id"] for v in verdicts})
    history = await verdict_history(database, caller.tenant_id, claim_ids)
    return {"context_id": answer_id, "verdicts": verdicts, "history": history}


@router.get("/v1/contexts/{context_id}/verdicts", response_model=models.Verdicts)
async def get_context_verdicts(context_id: str, database: ReadDb, caller: Read) -> dict[str, Any]:
    """The current verdicts on a record (its claims', or its statements') and their history."""
    if await record_kind(database, caller.tenant_id, context_id) in ("answer", "claim"):
        return await get_verdicts(context_id, database, caller)
    verdicts = await current_statement_verdicts(database, caller.tenant_id, [context_id])
    history = await verdict_history(database, caller.tenant_id, [context_id])
    return {"context_id": context_id, "verdicts": verdicts, "history": history}


@router.get("/v1/reports/claims", response_model=models.ClaimsReport)
async def get_claims_report(
    database: ReadDb,
    caller: Read,
    settings: AppSettings,
    since: IsoTime | None = None,
    bucket: str = "1 day",
    group_by: str = "produced_by",
) -> dict[str, Any]:
    """Failing rates (uncited, hallucinated_id, unsupported) per time bucket, produced_by and
    judge, from current verdicts of claims recorded since `since` (default: 30 days ago)."""
    rows = await claims_report(database, settings, caller.tenant_id, since, bucket, group_by)
    return {"group_by": group_by, "bucket": bucket, "rows": rows}


@router.get("/v1/reports/drift", response_model=models.DriftReport)
async def get_drift_report(
    database: ReadDb,
    caller: Read,
    settings: AppSettings,
    since: IsoTime | None = None,
    bucket: str = "1 day",
) -> dict[str, Any]:
    """Unsupported and merged rates per bucket, produced_by and judge, with the change against
    the previous bucket: which prompt version accounts for most failures."""
    rows = await drift_report(database, settings, caller.tenant_id, since, bucket)
    return {"bucket": bucket, "rows": rows}
