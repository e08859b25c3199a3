"""Offline judge: clauses and documents a text cites. A premise does not hold what it defers to.

"Termination notice is 30 days, as defined in Section 4 of the Master Agreement." rests its
statement on another text, which the premise does not quote: what the figure or the term means
there is not in the premise. A claim resting on a sentence that defers to a clause or document
("as defined in", "in accordance with", "per", "under", ...) or that names another document's
clause ("Section 4 of the Master Agreement provides ...") is not entailed by the premise alone
unless it cites the same text; as with a dropped limit, the judge then says ``unknown``. A
document named without a deferral ("The Refund Policy allows 45 days.") is what the premise is
about, and a bare clause number ("Section 4. Notice: 30 days.") is the premise's own heading:
both are read as usual.
"""

import re
from typing import Final

from lineage.claims.judges.comparison import _Verdict
from lineage.claims.judges.items import _Parsed, _Reference
from lineage.claims.judges.tokens import _Tok
from lineage.claims.judges.vocabulary import _STOPWORDS, _singular, _wordset

_CLAUSE_NOUNS: Final = _wordset(
    "section clause article schedule annex appendix exhibit paragraph subsection part chapter"
)
_DOCUMENT_NOUNS: Final = _wordset(
    """agreement contract policy handbook terms conditions addendum act regulation directive
    guideline manual code standard charter bylaws statute treaty convention licence license lease
    deed memorandum protocol specification rulebook"""
)
_DEFERRALS: Final[tuple[tuple[str, ...], ...]] = tuple(
    sorted(
        (
            tuple(phrase.split())
            for phrase in (
                "as defined in",
                "defined in",
                "as set out in",
                "set out in",
                "as set forth in",
                "set forth in",
                "as specified in",
                "specified in",
                "as described in",
                "described in",
                "as provided in",
                "provided in",
                "provided for in",
                "as stated in",
                "stated in",
                "referred to in",
                "given in",
                "within the meaning of",
                "in accordance with",
                "in line with",
                "pursuant to",
                "subject to",
                "governed by",
                "according to",
                "as per",
                "per",
                "under",
            )
        ),
        key=len,
        reverse=True,
    )
)
_DETERMINERS: Final = _wordset("the this that")
_ATTACHERS: Final = _wordset("of to in")
_LETTER_ID: Final = re.compile(r"^(?:[IVX]+|[A-Z])$")


def _deferral_start(tokens: list[_Tok], i: int) -> int | None:
    """The first token of the deferral that ends just before token i, if one does."""
    for phrase in _DEFERRALS:
        start = i - len(phrase)
        if (
            start >= 0
            and tuple(t.norm for t in tokens[start:i]) == phrase
            and tokens[start].sentence == tokens[i].sentence
        ):
            return start
    return None


def _clause_end(tokens: list[_Tok], j: int) -> int | None:
    """'Section 4', 'clause 7.2', 'Annex B', 'Article 6(1)(f)': the index of its last token."""
    if j + 1 >= len(tokens) or _singular(tokens[j].norm) not in _CLAUSE_NOUNS:
        return None
    number = tokens[j + 1]
    if number.kind != "num" and not (number.kind == "word" and _LETTER_ID.match(number.text)):
        return None
    end = j + 1
    while end + 3 < len(tokens) and tokens[end + 1].norm == "(" and tokens[end + 3].norm == ")":
        end += 3
    return end


def _document_end(tokens: list[_Tok], j: int, *, deferred: bool) -> int | None:
    """'Master Agreement', 'Data Processing Addendum': capitalised words ending in a document
    noun; after a deferral also in lower case ('the employee handbook') or an acronym ('GDPR')."""
    if j >= len(tokens):
        return None
    first = tokens[j]
    if deferred and first.kind == "word" and len(first.text) >= 3 and first.text.isupper():
        return j
    for k in range(j, min(j + 5, len(tokens))):
        tok = tokens[k]
        if tok.kind != "word" or tok.sentence != first.sentence or tok.norm in _STOPWORDS:
            return None
        if not deferred and not tok.text[:1].isupper():
            return None
        if _singular(tok.norm) in _DOCUMENT_NOUNS or tok.norm in _DOCUMENT_NOUNS:
            return k
    return None


def _reference_at(parsed: _Parsed, i: int) -> _Reference | None:
    tokens = parsed.tokens
    start = i + 1 if tokens[i].norm in _DETERMINERS else i
    deferral_first = _deferral_start(tokens, i)
    clause_end = _clause_end(tokens, start)
    document_end: int | None = None
    if clause_end is not None:
        k = clause_end + 1
        if k < len(tokens) and tokens[k].norm in _ATTACHERS:
            k += 1 + (k + 1 < len(tokens) and tokens[k + 1].norm in _DETERMINERS)
            document_end = _document_end(tokens, k, deferred=True)
        last = document_end if document_end is not None else clause_end
    else:
        document_end = _document_end(tokens, start, deferred=deferral_first is not None)
        if document_end is None:
            return None
        last = document_end
    key = tuple(
        _singular(t.norm)
        for t in tokens[start : last + 1]
        if t.norm not in _DETERMINERS and t.norm not in _ATTACHERS
    )
    deferral = parsed.surface(deferral_first, i - 1) if deferral_first is not None else ""
    external = bool(deferral) or (clause_end is not None and document_end is not None)
    first = deferral_first if deferral_first is not None else start
    surface = parsed.surface(start, last)
    return _Reference(surface, key, external, deferral, first, last, tokens[start].sentence)


def read_references(parsed: _Parsed) -> list[_Reference]:
    """Every clause or document the text cites, in order."""
    references: list[_Reference] = []
    i = 0
    while i < len(parsed.tokens):
        found = _reference_at(parsed, i)
        if found is None:
            i += 1
            continue
        references.append(found)
        i = found.last + 1
    return references


def _within(part: tuple[str, ...], whole: tuple[str, ...]) -> bool:
    n = len(part)
    return any(whole[k : k + n] == part for k in range(len(whole) - n + 1))


def check_references(v: _Verdict, h: _Parsed, p: _Parsed) -> None:
    """The claim's citations must be the premise's; what the premise defers to on the way to
    the claim must be cited by the claim too."""
    carried: list[_Reference] = []
    for cited in h.references:
        found = [r for r in p.references if _within(cited.key, r.key)]
        if not found:
            v.uncovered.append(cited.surface)
            continue
        carried.extend(found)
        v.matched_tokens.update(range(found[0].first, found[0].last + 1))
        v.evidence.append(f"'{cited.surface}'")
    resting = {p.tokens[k].sentence for k in v.matched_tokens}
    for ref in p.references:
        if not ref.external or ref.sentence not in resting or ref in carried:
            continue
        how = f" ('{ref.deferral}')" if ref.deferral else ""
        v.blockers.append(
            f"the premise rests it on '{ref.surface}'{how}, a text it does not hold, "
            "and the claim does not cite it"
        )
