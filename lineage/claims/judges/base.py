"""What every judge returns and the interface a judge offers."""

from dataclasses import dataclass
from typing import Final, Literal, Protocol, get_args

Outcome = Literal["entailed", "not_entailed", "unknown"]
OUTCOMES: Final[tuple[str, ...]] = get_args(Outcome)
LABELS: Final[tuple[str, ...]] = ("entailment", "contradiction", "neutral")


@dataclass(frozen=True, slots=True)
class Judgement:
    """One verdict on one (premise, claim) pair, with the judge that gave it."""

    outcome: Outcome
    reason: str
    judge: str
    judge_version: str


class Judge(Protocol):
    """Anything that grades a claim against its premise."""

    name: str
    version: str

    async def judge(self, premise: str, hypothesis: str) -> Judgement: ...
