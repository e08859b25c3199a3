"""The offline judge: rule based, no network, ``entailed`` only when sure."""

from typing import Final

from lineage.claims.judges.base import Judgement, Outcome
from lineage.claims.judges.comparison import (
    _check_bare_number,
    _check_date,
    _check_entity,
    _check_keyed,
    _check_label,
    _check_negations,
    _check_only,
    _check_premise_hazards,
    _check_quantity,
    _check_roles,
    _check_word,
    _quoted,
    _Verdict,
)
from lineage.claims.judges.inference import cross_references
from lineage.claims.judges.paraphrase import read_contraries, read_duration_verb
from lineage.claims.judges.parser import _parse
from lineage.claims.judges.references import check_references
from lineage.claims.judges.scope import check_dropped_scope, check_swapped_roles

MAX_PREMISE_CHARS: Final = 20_000
MAX_CLAIM_CHARS: Final = 1_000


def _judge_offline(premise: str, hypothesis: str) -> tuple[Outcome, str]:
    outcome, reason = _judge_text(premise, hypothesis)
    derived = cross_references(premise) if outcome != "entailed" else []
    if derived:
        lent, lent_reason = _judge_text("\n".join([premise, *derived]), hypothesis)
        if lent == "entailed":
            return lent, f"{lent_reason} (reading the premise's cross-reference as: {derived[0]!r})"
    return outcome, reason


def _judge_text(premise: str, hypothesis: str) -> tuple[Outcome, str]:
    h = _parse(hypothesis, premise=False)
    if not h.items and not h.negations:
        return "unknown", "the claim has nothing to check"
    if not premise.strip():
        return "unknown", "the premise is empty"
    p = _parse(premise, premise=True)
    v = _Verdict()
    for item in h.items:
        if item.kind == "quantity":
            _check_quantity(v, item, p)
        elif item.kind == "label":
            _check_label(v, item, p)
        elif item.kind == "bare":
            _check_bare_number(v, item, p)
        elif item.kind == "date":
            _check_date(v, item, p)
        elif item.kind in ("weekday", "clock", "literal"):
            noun = {"weekday": "day of the week", "clock": "time of day"}.get(item.kind)
            _check_keyed(v, item, p, noun or "identifier")
        elif item.kind == "entity":
            _check_entity(v, item, p)
        else:
            _check_word(v, item, h, p)
    check_references(v, h, p)
    read_contraries(v, h, p)
    read_duration_verb(v, h, p)
    _check_negations(v, h, p)
    _check_only(v, h, p)
    if v.conflicts:
        return "not_entailed", "; ".join(dict.fromkeys(v.conflicts))

    if v.uncovered:
        v.blockers.insert(0, f"the premise does not mention {_quoted(v.uncovered)}")
    _check_premise_hazards(v, h, p)
    _check_roles(v, h, p)
    check_dropped_scope(v, h, p)
    check_swapped_roles(v, h, p)
    if not v.blockers and not (v.clause_sets and set.intersection(*v.clause_sets)):
        v.blockers.append("the claim combines facts from different parts of the premise")
    if v.blockers:
        return "unknown", "not sure: " + "; ".join(dict.fromkeys(v.blockers))
    shown = list(dict.fromkeys(v.evidence))
    if v.words:
        shown.append(f"the words {_quoted(v.words)}")
    return "entailed", "the premise states every part of the claim: " + ", ".join(shown)


class OfflineJudge:
    """Rule-based judge: no network, no model; ``entailed`` only when sure, and says why.

    Its only world knowledge is a small table: number words, unit conversions (two weeks =
    14 days, two years = 24 months, 600 per minute = 10 per second), 'time and a half' = 1.5 times,
    'double' = 2 times, a few synonym groups (need/require, get/receive, can/may/permitted), and
    one inference: a group whose terms "follow" another group's policy gets that group's terms.
    Paraphrases beyond that come back ``unknown``, and so do claims that drop a limit of the
    premise ("for annual plans", "in 2020"), swap two words around a third, or rest on a sentence
    that defers to a text the premise does not hold ("as defined in Section 4 of the Master
    Agreement") without citing it. Texts past
    MAX_PREMISE_CHARS or MAX_CLAIM_CHARS are not read (``unknown``): the rules' cost grows with
    the product of the two lengths.
    """

    name: str = "offline"
    version: str = "3"

    async def judge(self, premise: str, hypothesis: str) -> Judgement:
        return self.judge_sync(premise, hypothesis)

    def judge_sync(self, premise: str, hypothesis: str) -> Judgement:
        """The same verdict without an event loop; the rules do no I/O."""
        if len(premise) > MAX_PREMISE_CHARS or len(hypothesis) > MAX_CLAIM_CHARS:
            reason = (
                f"too long for the offline judge: premise {len(premise)} and claim "
                f"{len(hypothesis)} characters (at most {MAX_PREMISE_CHARS} and {MAX_CLAIM_CHARS})"
            )
            return Judgement("unknown", reason, self.name, self.version)
        outcome, reason = _judge_offline(premise, hypothesis)
        return Judgement(outcome, reason, self.name, self.version)
