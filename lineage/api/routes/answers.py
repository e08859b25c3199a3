"""Answers and their claims: ingest a model's output, verify its claims, report drift.

The judge is `app.state.claim_judge` when the deployment sets one (any `Judge`, e.g. an
`OpenAICompatibleJudge`), else the rule-based `OfflineJudge`.
"""

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from lineage import db
from lineage.api.deps import AppSettings, Ingest, Pool, Read, ReadPool, SentTraceId
from lineage.claims.answers import record_answer_in
from lineage.claims.judges import Judge, OfflineJudge
from lineage.claims.verify import (
    claims_report,
    context_text_resolver,
    current_verdicts,
    mapping_resolver,
    verify_claims,
)

router = APIRouter(tags=["answers"])


def get_judge(request: Request) -> Judge:
    judge: Judge | None = getattr(request.app.state, "claim_judge", None)
    return judge or OfflineJudge()


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
    capture_text: bool = Field(
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
        description="cited context id -> text; ids not given come from context_text",
    )


@router.post("/v1/answers", status_code=201, responses={200: {"description": "a replay"}})
async def post_answer(
    body: AnswerIn, pool: Pool, caller: Ingest, sent_trace_id: SentTraceId
) -> JSONResponse:
    """Record one claim per claim and an answer over them, in one transaction. Cited ids not in
    the prompt are kept in the claim's `cited_ids` and never become edges. 404 for an unknown
    prompt."""
    async with db.transaction(pool, caller.tenant_id) as connection:
        recorded = await record_answer_in(
            connection,
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
    return JSONResponse(recorded.as_dict(), status_code=201 if recorded.created else 200)


@router.post("/v1/answers/{answer_id}/verify")
async def verify_answer(
    answer_id: str, request: Request, pool: Pool, caller: Read, body: VerifyIn | None = None
) -> dict[str, Any]:
    """Judge each claim (an answer's, or one claim's) and append a verdict record per claim.
    Each claim links to its walk-back (`lineage`) and suspicious hops."""
    given = body or VerifyIn()
    default = context_text_resolver(pool, caller.tenant_id)
    resolver = mapping_resolver(given.premise_texts, default) if given.premise_texts else None
    verification = await verify_claims(
        pool,
        caller.tenant_id,
        answer_id,
        get_judge(request),
        resolver,
        claim_texts=given.claim_texts,
    )
    return verification.as_dict()


@router.get("/v1/answers/{answer_id}/verdicts")
async def get_verdicts(answer_id: str, pool: ReadPool, caller: Read) -> dict[str, Any]:
    """The current verdict per (claim, judge): the newest; older verdicts stay recorded."""
    verdicts = await current_verdicts(pool, caller.tenant_id, answer_id)
    return {"context_id": answer_id, "verdicts": verdicts}


@router.get("/v1/reports/claims")
async def get_claims_report(
    pool: ReadPool,
    caller: Read,
    settings: AppSettings,
    since: datetime | None = None,
    bucket: str = "1 day",
    group_by: str = "produced_by",
) -> dict[str, Any]:
    """Failing rates (uncited, hallucinated_id, unsupported) per time bucket, produced_by and
    judge, from current verdicts of claims recorded since `since` (default: 30 days ago)."""
    rows = await claims_report(pool, settings, caller.tenant_id, since, bucket, group_by)
    return {"group_by": group_by, "bucket": bucket, "rows": rows}
