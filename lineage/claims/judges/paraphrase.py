"""Offline judge: two rephrasings it reads as the premise's wording, after the items are matched.

- A negated word and its contrary: 'never leaves the EU' states 'stays in the EU', and 'does
  not leave' is what 'stays' says. Only contraries with no middle ground are listed (what does
  not leave stays; what is not open is closed), so 'not large' never reads as 'small'.
- 'lasts two years' for 'for two years.': a claim's 'last' is what a premise's matched duration
  says when 'for' introduces it and it closes the statement.
"""

from typing import Final

from lineage.claims.judges.comparison import _Verdict
from lineage.claims.judges.items import _Parsed
from lineage.claims.judges.vocabulary import _word_key

_CONTRARY_WORDS: Final[tuple[tuple[str, str], ...]] = (
    ("leave", "stay remain"),
    ("include", "exclude"),
    ("accept", "reject refuse decline"),
    ("pass", "fail"),
    ("succeed", "fail"),
    ("open", "close closed shut"),
    ("enable", "disable"),
    ("same", "different"),
)


def _contraries() -> dict[str, frozenset[str]]:
    """Each word's key to the keys of its contraries, both ways round."""
    table: dict[str, set[str]] = {}
    for word, others in _CONTRARY_WORDS:
        for other in others.split():
            table.setdefault(_word_key(word), set()).add(_word_key(other))
            table.setdefault(_word_key(other), set()).add(_word_key(word))
    return {key: frozenset(keys) for key, keys in table.items()}


_CONTRARIES: Final = _contraries()
_DURATION_VERB: Final = _word_key("last")
_DURATION_DIMENSIONS: Final = frozenset({"duration", "calendar"})


def _cover(v: _Verdict, surface: str, shown: str) -> None:
    v.uncovered = [u for u in v.uncovered if u != surface]
    v.evidence.append(f"'{surface}' ~ '{shown}'")


def read_contraries(v: _Verdict, h: _Parsed, p: _Parsed) -> None:
    """'stays' against 'never leaves', and 'does not leave' against 'stays'."""
    for item in h.of_kind("word"):
        contraries = _CONTRARIES.get(item.key, frozenset())
        for index, neg in enumerate(p.negations):
            if item.surface in v.uncovered and neg.heads & contraries:
                _cover(v, item.surface, neg.surface)
                v.answered_negations.add(index)
                v.matched_tokens.update(range(neg.first, neg.last + 1))
                v.clause_sets.append({p.tokens[neg.first].clause})
    stated = [x for x in p.of_kind("word") if x.status == "active"]
    for index, neg in enumerate(h.negations):
        for x in stated:
            if not neg.heads & _CONTRARIES.get(x.key, frozenset()):
                continue
            v.answered_claim_negations.add(index)
            v.matched_tokens.add(x.first)
            v.clause_sets.append({x.clause})
            for word in h.of_kind("word"):
                if word.key in neg.heads and word.surface in v.uncovered:
                    _cover(v, word.surface, x.surface)
            break


def read_duration_verb(v: _Verdict, h: _Parsed, p: _Parsed) -> None:
    """'lasts 24 months' against 'for two years', once the figures have matched."""
    verbs = [x for x in h.of_kind("word") if x.key == _DURATION_VERB and x.surface in v.uncovered]
    if not verbs:
        return
    for x in p.of_kind("quantity"):
        dimension = x.key.split("/")[0]
        introduced = x.first > 0 and p.tokens[x.first - 1].norm == "for"
        # 'for two years.' ends the statement; 'for two years of violations' is no duration of it
        closing = x.last + 1 == len(p.tokens) or p.tokens[x.last + 1].kind == "punct"
        if (
            dimension in _DURATION_DIMENSIONS
            and introduced
            and closing
            and x.first in v.matched_tokens
        ):
            for verb in verbs:
                _cover(v, verb.surface, p.surface(x.first - 1, x.last))
            return
