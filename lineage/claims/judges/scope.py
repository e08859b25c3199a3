"""Offline judge: what a claim may not drop. A premise that limits its statement to a group,
a condition or a time ("for annual plans", "above 50 dollars", "in 2020") does not entail the
statement without that limit; nor does "the landlord pays the tenant" entail its mirror image.
"""

from typing import Final

from lineage.claims.judges.comparison import _quoted, _Verdict
from lineage.claims.judges.items import _Parsed
from lineage.claims.judges.vocabulary import _FUNCTION_WORDS, _word_key, _wordset

# Prepositions that narrow what a statement is about; "within", "before", "from ... to" and the
# like bound a figure, state a relation or a change, which other rules read.
_SCOPE_WORDS: Final = _wordset("for above over below under in on during among at")
_PAST_AUXILIARIES: Final = _wordset("was were had did")
_PRESENT_AUXILIARIES: Final = _wordset("is are am has have does do will")
_PHRASE_TOKENS: Final = 4


def _is_year(p: _Parsed, index: int) -> bool:
    tok = p.tokens[index]
    return tok.kind == "num" and tok.norm.isdigit() and 1800 <= int(tok.norm) <= 2199


def _date_tokens(p: _Parsed) -> set[int]:
    dated = {k for x in p.items if x.kind == "date" for k in range(x.first, x.last + 1)}
    return dated | {i for i in range(len(p.tokens)) if _is_year(p, i)}


def _claim_is_past(h: _Parsed) -> bool:
    norms = [t.norm for t in h.tokens if t.kind == "word"]
    if any(n in _PAST_AUXILIARIES for n in norms):
        return True
    return not any(n in _PRESENT_AUXILIARIES for n in norms) and any(
        n.endswith("ed") for n in norms
    )


def check_dropped_scope(v: _Verdict, h: _Parsed, p: _Parsed) -> None:
    """A limiting phrase of a matched premise clause that the claim leaves out blocks it."""
    claim_keys = {_word_key(t.norm) for t in h.tokens if t.kind == "word"}
    matched_clauses = {p.tokens[k].clause for k in v.matched_tokens}
    dates = _date_tokens(p)
    claim_dated = bool(_date_tokens(h))
    for i, tok in enumerate(p.tokens):
        if tok.kind != "word" or tok.norm not in _SCOPE_WORDS or tok.clause not in matched_clauses:
            continue
        if i in v.matched_tokens or _word_key(tok.norm) in claim_keys:
            continue
        phrase = []
        for k in range(i + 1, min(i + 1 + _PHRASE_TOKENS, len(p.tokens))):
            nxt = p.tokens[k]
            if nxt.clause != tok.clause or nxt.kind == "punct" or nxt.norm in _SCOPE_WORDS:
                break
            if nxt.kind == "num" or nxt.norm not in _FUNCTION_WORDS:
                phrase.append(k)
        dropped = [k for k in phrase if k not in v.matched_tokens]
        if not dropped:
            continue
        surface = p.surface(i, phrase[-1])
        if all(k in dates for k in phrase):
            if not claim_dated and not _claim_is_past(h):
                v.blockers.append(f"the premise dates it ('{surface}'), the claim does not")
            continue
        v.blockers.append(f"the premise limits it to '{surface}', which the claim drops")


def check_swapped_roles(v: _Verdict, h: _Parsed, p: _Parsed) -> None:
    """Two matched words on either side of a third in the claim, and the other way round in
    the premise: 'the tenant pays the landlord' from 'the landlord pays the tenant'."""
    one_passive = any(t.norm == "by" for t in h.tokens) != any(t.norm == "by" for t in p.tokens)
    if one_passive:
        return
    aligned = sorted(v.aligned)
    for c_claim, c_premise, pivot in aligned:
        if h.tokens[c_claim].norm in _FUNCTION_WORDS:
            continue  # a negation or modal word is no pivot: "X cannot Y" may read "Y ... not X"
        clause = p.tokens[c_premise].clause
        same = [(a, b, s) for a, b, s in aligned if p.tokens[b].clause == clause]
        before = [s for a, b, s in same if a < c_claim and b > c_premise]
        after = [s for a, b, s in same if a > c_claim and b < c_premise]
        if before and after:
            v.blockers.append(
                f"the claim may swap the roles of {_quoted([before[0], after[0]])} around '{pivot}'"
            )
            return
