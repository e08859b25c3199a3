"""Claim judges: does the cited context (premise) entail a claim (hypothesis)?

A judge answers ``entailed``, ``not_entailed`` or ``unknown`` with a reason a person can check.

``OfflineJudge`` is rule based and conservative. It says ``entailed`` only when every figure,
date, name and content word of the claim is found in one clause of the premise, nothing in the
premise (a negation, a condition, a hedge, a superseded value, a second candidate value) could
undo the match, and the claim cites every text that the premise's sentence defers to. It says
``not_entailed`` only on concrete evidence: a figure, date, name, identifier or negation of the
claim that the premise lacks or states differently. Everything else is ``unknown``.

``OpenAICompatibleJudge`` asks an LLM grader and turns every grader failure into ``unknown``.
``score_judge`` measures a judge against labelled pairs.
"""

from lineage.claims.judges.base import LABELS, OUTCOMES, Judge, Judgement, Outcome
from lineage.claims.judges.llm import PROMPT_VERSION, OpenAICompatibleJudge
from lineage.claims.judges.offline import OfflineJudge
from lineage.claims.judges.plugins import ENTRY_POINT_GROUP, judge_from_settings
from lineage.claims.judges.scoring import format_scores, score_judge

__all__ = [
    "ENTRY_POINT_GROUP",
    "LABELS",
    "OUTCOMES",
    "PROMPT_VERSION",
    "Judge",
    "Judgement",
    "OfflineJudge",
    "OpenAICompatibleJudge",
    "Outcome",
    "format_scores",
    "judge_from_settings",
    "score_judge",
]
