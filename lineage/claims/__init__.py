"""Claims: split an answer into claims and judge each against the context it cites."""

from lineage.claims.judges import (
    LABELS,
    OUTCOMES,
    Judge,
    Judgement,
    OfflineJudge,
    OpenAICompatibleJudge,
    Outcome,
    format_scores,
    score_judge,
)

__all__ = [
    "LABELS",
    "OUTCOMES",
    "Judge",
    "Judgement",
    "OfflineJudge",
    "OpenAICompatibleJudge",
    "Outcome",
    "format_scores",
    "score_judge",
]
