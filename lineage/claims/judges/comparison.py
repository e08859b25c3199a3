"""Offline judge: each checkable part of a claim against the parsed premise."""

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from lineage.claims.judges.items import _Item, _Parsed, _Quantity
from lineage.claims.judges.tokens import _parse_number
from lineage.claims.judges.vocabulary import (
    _APOSTROPHE,
    _CONDITIONALS,
    _HEDGES,
    _MODAL_KEYS,
    _RELATIONS,
    _STOPWORDS,
    _UNIVERSALS,
    _stem,
    _word_key,
)


@dataclass(slots=True)
class _Verdict:
    conflicts: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    uncovered: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    clause_sets: list[set[int]] = field(default_factory=list)
    matched_tokens: set[int] = field(default_factory=set)
    placements: list[tuple[int, int, str]] = field(default_factory=list)
    # (claim token, premise token, claim surface) of every item matched in the same form
    # (possessives aside), for word order: a changed form (remote/remotely) means a rephrasing.
    aligned: list[tuple[int, int, str]] = field(default_factory=list)
    # Negations a contrary word answers ('never leaves' for 'stays'): premise's, then claim's.
    answered_negations: set[int] = field(default_factory=set)
    answered_claim_negations: set[int] = field(default_factory=set)

    def match(self, hyp: _Item, found: list[_Item], *, name_like: bool = False) -> None:
        self.clause_sets.append({item.clause for item in found})
        for item in found:
            self.matched_tokens.update(range(item.first, item.last + 1))
        if name_like:
            self.placements.append((hyp.first, found[0].first, hyp.surface))
        if _bare(hyp.surface) == _bare(found[0].surface):
            self.aligned.append((hyp.first, found[0].first, hyp.surface))
        shown = found[0].surface
        if hyp.kind != "word":
            same = hyp.surface.lower() == shown.lower()
            self.evidence.append(f"'{hyp.surface}'" if same else f"'{hyp.surface}' = '{shown}'")
        elif hyp.key.startswith("=") and _stem(hyp.surface.lower()) != _stem(shown.lower()):
            self.evidence.append(f"'{hyp.surface}' ~ '{shown}'")
        else:
            self.words.append(hyp.surface)


def _bare(surface: str) -> str:
    return surface.lower().removesuffix("'s").removesuffix(_APOSTROPHE + "s").removesuffix("'")


def _quoted(surfaces: Iterable[str]) -> str:
    return ", ".join(f"'{s}'" for s in dict.fromkeys(surfaces))


def _compare_quantities(h: _Quantity, p: _Quantity) -> str:
    """match | near (consistent, but not what the premise states) | contra."""
    if h.approx or p.approx or h.modifiers != p.modifiers:
        # Approximate or differently qualified figures conflict only when far apart.
        slack = 2.0 if h.modifiers != p.modifiers else 1.5
        if h.high < p.low / slack or h.low > p.high * slack:
            return "contra"
        return "near"
    if math.isclose(h.low, p.low, rel_tol=1e-9) and math.isclose(h.high, p.high, rel_tol=1e-9):
        return "match" if h.bound == p.bound else "near"
    if p.is_range or h.is_range:
        return "near" if h.low <= p.high and p.low <= h.high else "contra"
    if h.bound == "eq" and p.bound == "min":
        return "near" if h.low >= p.low else "contra"
    if h.bound == "eq" and p.bound == "max":
        return "near" if h.low <= p.low else "contra"
    return "contra"


def _check_quantity(v: _Verdict, item: _Item, p: _Parsed) -> None:
    assert item.quantity is not None
    results = [
        (q, _compare_quantities(item.quantity, q.quantity))
        for q in p.items
        if q.key == item.key and q.quantity is not None
    ]
    active = [(q, r) for q, r in results if q.status == "active"]
    matches = [q for q, r in active if r == "match"]
    if matches:
        others = [q.surface for q, r in active if r != "match"]
        if others:
            v.blockers.append(
                f"the premise gives more than one figure of this kind "
                f"({_quoted([matches[0].surface, *others])})"
            )
        v.match(item, matches)
        return
    superseded = [q for q, r in results if q.status == "superseded" and r == "match"]
    if superseded:
        v.conflicts.append(
            f"claim says '{item.surface}' but the premise changes it: {superseded[0].note}"
        )
        return
    near = [q.surface for q, r in results if r == "near" and q.status != "superseded"]
    if near:
        v.blockers.append(f"the claim says '{item.surface}' where the premise says {_quoted(near)}")
        return
    contra = [q.surface for q, r in active if r == "contra"]
    if contra:
        v.conflicts.append(f"claim says '{item.surface}' but the premise says {_quoted(contra)}")
        return
    _check_bare_number(v, item, p)


def _check_label(v: _Verdict, item: _Item, p: _Parsed) -> None:
    assert item.quantity is not None
    same = [x for x in p.of_kind("label") if x.key == item.key and x.quantity is not None]
    matches = [
        x
        for x in same
        if x.status == "active" and x.quantity and math.isclose(x.quantity.low, item.quantity.low)
    ]
    if matches:
        v.match(item, matches, name_like=True)
    elif same:
        surfaces = [x.surface for x in same]
        v.conflicts.append(f"claim says '{item.surface}' but the premise says {_quoted(surfaces)}")
    else:
        _check_bare_number(v, item, p)


def _check_bare_number(v: _Verdict, item: _Item, p: _Parsed) -> None:
    assert item.quantity is not None
    value = _parse_number(item.quantity.parts[0])
    clauses = {c for n, c in p.numbers if value is not None and math.isclose(value, n)}
    if not clauses:
        v.conflicts.append(f"claim says '{item.surface}', which the premise does not mention")
    elif item.kind == "bare":
        v.clause_sets.append(clauses)
        v.evidence.append(f"'{item.surface}'")
    else:
        v.blockers.append(f"the premise has the number in '{item.surface}' but not in that sense")


def _check_date(v: _Verdict, item: _Item, p: _Parsed) -> None:
    def covers(d: _Item) -> bool:
        return all(h is None or h == x for h, x in zip(item.date, d.date, strict=True))

    def differs(d: _Item) -> bool:
        pairs = zip(item.date, d.date, strict=True)
        return any(h is not None and x is not None and h != x for h, x in pairs)

    dates = p.of_kind("date")
    active = [d for d in dates if d.status == "active"]
    matches = [d for d in active if covers(d)]
    superseded = [d for d in dates if d.status == "superseded" and covers(d)]
    endpoints = [d for d in dates if d.status == "endpoint" and covers(d)]
    differing = [d.surface for d in active if differs(d)]
    if matches:
        if differing:
            both = _quoted([matches[0].surface, *differing])
            v.blockers.append(f"the premise gives more than one date ({both})")
        v.match(item, matches)
    elif superseded:
        v.conflicts.append(
            f"claim says '{item.surface}' but the premise changes it: {superseded[0].note}"
        )
    elif endpoints:
        v.blockers.append(
            f"'{item.surface}' is one end of a range in the premise ({endpoints[0].note})"
        )
    elif differing:
        v.conflicts.append(f"claim says '{item.surface}' but the premise says {_quoted(differing)}")
    elif active:
        vaguer = _quoted(d.surface for d in active)
        v.conflicts.append(f"claim says '{item.surface}' but the premise only says {vaguer}")
    else:
        v.conflicts.append(f"claim says '{item.surface}', which the premise does not mention")


def _check_keyed(v: _Verdict, item: _Item, p: _Parsed, noun: str) -> None:
    """Weekdays, clock times and identifiers: the premise must give the same one."""
    same_kind = p.of_kind(item.kind)
    found = [x for x in same_kind if x.key == item.key]
    active = [x for x in found if x.status == "active"]
    if active:
        others = [x.surface for x in same_kind if x.status == "active" and x.key != item.key]
        if others and item.kind != "literal":
            both = _quoted([active[0].surface, *others])
            v.blockers.append(f"the premise gives more than one {noun} ({both})")
        v.match(item, active, name_like=item.kind == "literal")
        return
    if found:
        state = found[0]
        if state.status == "superseded":
            v.conflicts.append(
                f"claim says '{item.surface}' but the premise changes it: {state.note}"
            )
        else:
            v.blockers.append(
                f"'{item.surface}' is one end of a range in the premise ({state.note})"
            )
        return
    if item.kind == "literal":
        shape = re.sub(r"\d+", "#", item.key)
        same_kind = [x for x in same_kind if re.sub(r"\d+", "#", x.key) == shape]
    others = [x.surface for x in same_kind if x.status == "active"]
    if others:
        v.conflicts.append(f"claim says '{item.surface}' but the premise says {_quoted(others)}")
    else:
        v.conflicts.append(f"claim says '{item.surface}', which the premise does not mention")


def _check_entity(v: _Verdict, item: _Item, p: _Parsed) -> None:
    n = len(item.words)
    norms = [tok.norm for tok in p.tokens]
    starts = [i for i in range(len(norms) - n + 1) if tuple(norms[i : i + n]) == item.words]
    entities = p.of_kind("entity")
    if not starts:
        hint = f" (the premise names {_quoted(x.surface for x in entities)})" if entities else ""
        v.conflicts.append(
            f"claim names '{item.surface}', which the premise does not mention{hint}"
        )
        return

    def owner(start: int) -> _Item | None:
        return next((x for x in entities if x.first <= start <= x.last), None)

    found = [
        _Item("entity", item.key, p.surface(i, i + n - 1), p.tokens[i].clause, i, i + n - 1)
        for i in starts
        if (o := owner(i)) is None or o.status == "active"
    ]
    if not found:
        state = owner(starts[0])
        note = state.note if state else ""
        if state and state.status == "superseded":
            v.conflicts.append(f"claim says '{item.surface}' but the premise changes it: {note}")
        else:
            v.blockers.append(f"'{item.surface}' is one end of a range in the premise ({note})")
        return
    names = [x.surface for x in entities if x.status == "active"]
    if len({name.lower() for name in names}) >= 2:
        v.blockers.append(f"the premise has more than one name ({_quoted(names)})")
    v.match(item, found, name_like=True)


def _check_word(v: _Verdict, item: _Item, h: _Parsed, p: _Parsed) -> None:
    found = [x for x in p.of_kind("word") if x.key == item.key]
    active = [x for x in found if x.status == "active"]
    if active:
        names = [x for x in active if x.surface[:1].isupper() and not p.tokens[x.first].initial]
        name_like = bool(names) or (item.surface[:1].isupper() and not h.tokens[item.first].initial)
        v.match(item, names or active, name_like=name_like)
    elif found and found[0].status == "superseded":
        v.conflicts.append(
            f"claim says '{item.surface}' but the premise changes it: {found[0].note}"
        )
    elif found:
        v.blockers.append(
            f"'{item.surface}' is one end of a range in the premise ({found[0].note})"
        )
    else:
        v.uncovered.append(item.surface)


def _check_negations(v: _Verdict, h: _Parsed, p: _Parsed) -> None:
    aligned = set(v.answered_negations)
    for index, neg in enumerate(h.negations):
        partners = {i for i, pn in enumerate(p.negations) if pn.keys & neg.keys}
        aligned |= partners
        if partners or index in v.answered_claim_negations:
            continue
        if p.negations:
            theirs = _quoted(pn.surface for pn in p.negations)
            v.conflicts.append(
                f"the claim says '{neg.surface}' but the premise does not (it says {theirs})"
            )
        else:
            v.conflicts.append(f"the claim says '{neg.surface}' but the premise has no negation")
    negated = {k for neg in h.negations for k in range(neg.first, neg.last + 1)}
    claim_words = [
        (tok.text, _word_key(tok.norm))
        for k, tok in enumerate(h.tokens)
        if tok.kind == "word" and k not in negated
    ]
    for index, neg in enumerate(p.negations):
        if index in aligned:
            continue
        targets = neg.heads or (frozenset({neg.modal}) if neg.modal else frozenset())
        hits = [text for text, key in claim_words if key in targets]
        if hits:
            v.conflicts.append(
                f"the premise says '{neg.surface}' but the claim says {_quoted(hits)}"
            )
        else:
            v.blockers.append(
                f"the premise says '{neg.surface}', a negation the claim does not carry"
            )


def _check_only(v: _Verdict, h: _Parsed, p: _Parsed) -> None:
    """'Only administrators can ...' against 'Any member can ...'."""
    universals = [i for i, tok in enumerate(h.tokens) if tok.norm in _UNIVERSALS]
    if not universals:
        return
    claim_keys = {_word_key(tok.norm) for tok in h.tokens if tok.kind == "word"}
    for i, tok in enumerate(p.tokens):
        if tok.norm != "only":
            continue
        target = next(
            (
                k
                for k in range(i + 1, min(i + 4, len(p.tokens)))
                if p.tokens[k].norm not in _STOPWORDS
            ),
            None,
        )
        if target is None or p.tokens[target].kind != "word":
            continue
        if _word_key(p.tokens[target].norm) in claim_keys:
            continue
        u = universals[0]
        claim = h.surface(u, min(u + 1, len(h.tokens) - 1))
        v.conflicts.append(
            f"the premise says '{p.surface(i, target)}' but the claim says '{claim}'"
        )
        return


def _check_roles(v: _Verdict, h: _Parsed, p: _Parsed) -> None:
    """Names and identifiers keep their order, or reverse it when only one side is passive."""
    placed = sorted(v.placements)
    premise_order = [premise_at for _, premise_at, _ in placed]
    if len(placed) < 2 or premise_order == sorted(premise_order):
        return
    one_passive = any(t.norm == "by" for t in h.tokens) != any(t.norm == "by" for t in p.tokens)
    if one_passive and premise_order == sorted(premise_order, reverse=True):
        return
    v.blockers.append(
        f"the claim may swap the roles of {_quoted(surface for _, _, surface in placed)}"
    )


def _check_premise_hazards(v: _Verdict, h: _Parsed, p: _Parsed) -> None:
    """Premise wording that can undo a match: modality, conditions, relations to matched values."""
    claim_keys = {x.key for x in h.items if x.kind == "word"} | {
        _word_key(tok.norm) for tok in h.tokens if tok.kind == "word"
    }
    hedges = [
        x.surface
        for x in p.of_kind("word")
        if (x.key in _MODAL_KEYS or x.surface.lower() in _HEDGES) and x.key not in claim_keys
    ]
    if hedges:
        v.blockers.append(f"the premise qualifies it with {_quoted(hedges)}, which the claim drops")
    inside_values = {k for x in p.items if x.kind != "word" for k in range(x.first, x.last + 1)}
    for i, tok in enumerate(p.tokens):
        if i in inside_values or _word_key(tok.norm) in claim_keys:
            continue
        if tok.norm in _CONDITIONALS:
            v.blockers.append(f"the premise is conditional ('{tok.text}')")
        elif tok.norm in _RELATIONS:
            window = [
                k
                for k in range(i + 1, min(i + 5, len(p.tokens)))
                if p.tokens[k].clause == tok.clause and p.tokens[k].kind != "punct"
            ]
            if any(k in v.matched_tokens for k in window):
                v.blockers.append(
                    f"the premise says '{p.surface(i, window[-1])}', "
                    "a relation the claim does not state"
                )
