"""Offline judge: the one inference it draws, a cross-reference between two groups' terms.

"Contractor notice follows the employee policy." with "Employees: 30 days' notice." states
that contractors get 30 days' notice, the same as employees. A premise sentence of exactly that
shape (nothing before or after it: no negation, condition or exception) lends each sentence
that opens with the other group's name to the first group, as a derived sentence the rules
then read like any other. A label line ("Employees: 30 days' notice.") lent this way is read as
what the group receives. Nothing else is inferred.
"""

import re
from typing import Final

from lineage.claims.judges.vocabulary import _singular

_CROSS_REFERENCE: Final = re.compile(
    r"^(?P<borrower>[A-Z][a-z]+?)(?:'s|s')?(?: (?P<topic>[a-z]+))? follows? the "
    r"(?P<lender>[a-z]+) (?:policy|policies|rules|terms)\.?$"
)
_SENTENCE: Final = re.compile(r"[^.!?\n]+[.!?]?")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def _lent(sentence: str, lender: str, borrower: str, topic: str | None) -> str | None:
    """The sentence restated for the borrowing group, when it opens with the lending group."""
    head, _, rest = sentence.partition(" ")
    name = head.rstrip(":")
    if _singular(name.lower()) != _singular(lender) or not rest:
        return None
    if topic is not None and topic not in rest.lower():
        return None
    plural = name.lower().endswith("s")
    group = borrower + ("s" if plural and not borrower.endswith("s") else "")
    body = rest.rstrip(".!? ")
    verb = "receive " if head.endswith(":") else ""
    return f"{group} {verb}{body} the same as {name.lower()}."


def cross_references(premise: str) -> list[str]:
    """Derived sentences: each lent sentence restated for the group that borrows its terms."""
    sentences = _sentences(premise)
    derived: list[str] = []
    for sentence in sentences:
        found = _CROSS_REFERENCE.match(sentence)
        if found is None:
            continue
        borrower, lender = found["borrower"], found["lender"]
        for other in sentences:
            if other is not sentence and (lent := _lent(other, lender, borrower, found["topic"])):
                derived.append(lent)
    return list(dict.fromkeys(derived))
