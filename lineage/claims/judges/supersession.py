"""Offline judge: which premise values a later one supersedes (changed, from-to, replaced)."""

from lineage.claims.judges.items import _Item, _Parsed, _Quantity
from lineage.claims.judges.vocabulary import (
    _CHANGE_STEMS,
    _CLAUSE_WORDS,
    _EN_DASH,
    _STOPWORDS,
    _SUPERSEDERS,
    _stem,
)


def _change_verb(parsed: _Parsed, sentence: int) -> str | None:
    for tok in parsed.tokens:
        if tok.sentence == sentence and tok.kind == "word" and _stem(tok.norm) in _CHANGE_STEMS:
            return tok.text.lower()
    return None


def _mark_changed_quantities(parsed: _Parsed) -> None:
    """'reduced from 30 to 14 days': 14 days holds, 30 days is superseded."""
    for item in list(parsed.items):
        q = item.quantity
        if item.kind != "quantity" or q is None or not q.from_to:
            continue
        verb = _change_verb(parsed, parsed.tokens[item.first].sentence)
        if verb is None:
            continue
        old, new, unit = q.parts
        spaced = f" {unit}" if unit else ""
        note = f"{verb} from '{old}{spaced}' to '{new}{spaced}'"
        old_value, new_value = q.values
        item.surface = f"{new}{spaced}"
        q.values, q.parts = (new_value, new_value), (new, "", unit)
        superseded = _Quantity(
            (old_value, old_value), q.bound, q.approx, q.modifiers, True, (old, "", unit)
        )
        parsed.items.append(
            _Item(
                item.kind,
                item.key,
                f"{old}{spaced}",
                item.clause,
                item.first,
                item.last,
                quantity=superseded,
                status="superseded",
                note=note,
            )
        )


def _mark_from_to(parsed: _Parsed) -> None:
    """'moved from Tuesday to Thursday' supersedes Tuesday; without a change verb it is a range."""
    tokens = parsed.tokens
    handled = {x.first - 1 for x in parsed.items if x.quantity is not None and x.quantity.from_to}
    for i, tok in enumerate(tokens):
        if tok.norm != "from" or i in handled:
            continue
        to = next(
            (
                k
                for k in range(i + 2, min(i + 7, len(tokens)))
                if tokens[k].norm in ("to", "until", "till", "through", _EN_DASH)
                and tokens[k].sentence == tok.sentence
            ),
            None,
        )
        if to is None:
            continue
        end = to
        for k in range(to + 1, min(to + 6, len(tokens))):
            if tokens[k].kind == "punct" or tokens[k].norm in _STOPWORDS | _CLAUSE_WORDS:
                break
            end = k
        if end == to:
            continue
        verb = _change_verb(parsed, tok.sentence)
        old, new = parsed.surface(i + 1, to - 1), parsed.surface(to + 1, end)
        for item in parsed.items:
            if item.status != "active":
                continue
            if i < item.first < to and verb:
                item.status, item.note = "superseded", f"{verb} from '{old}' to '{new}'"
            elif (i < item.first < to or to < item.first <= end) and not verb:
                item.status, item.note = "endpoint", f"from '{old}' to '{new}'"


def _mark_superseders(parsed: _Parsed) -> None:
    """'instead of X', 'previously X': X no longer holds."""
    tokens = parsed.tokens
    for i in range(len(tokens)):
        for phrase in _SUPERSEDERS:
            n = len(phrase)
            if tuple(tok.norm for tok in tokens[i : i + n]) != phrase:
                continue
            end = i + n - 1
            for k in range(i + n, min(i + n + 4, len(tokens))):
                if tokens[k].kind == "punct" or tokens[k].clause != tokens[i].clause:
                    break
                end = k
            note = f"'{parsed.surface(i, end)}'"
            for item in parsed.items:
                if item.status == "active" and i + n <= item.first <= end:
                    item.status, item.note = "superseded", note
