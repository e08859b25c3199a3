"""Offline judge: what a parsed text holds (quantities, items, negations)."""

from dataclasses import dataclass, field

from lineage.claims.judges.tokens import _Tok
from lineage.claims.judges.vocabulary import _APOSTROPHE, _Bound, _Date, _ItemKind, _Status


@dataclass(slots=True)
class _Quantity:
    values: tuple[float, float]  # in the dimension's base unit, as written: (first, second)
    bound: _Bound
    approx: bool
    modifiers: frozenset[str]
    from_to: bool
    parts: tuple[str, str, str]  # surfaces: first number, second number, unit

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    @property
    def is_range(self) -> bool:
        return self.values[0] != self.values[1]


@dataclass(slots=True)
class _Item:
    kind: _ItemKind
    key: str
    surface: str
    clause: int
    first: int
    last: int
    quantity: _Quantity | None = None
    date: _Date = (None, None, None)
    words: tuple[str, ...] = ()
    status: _Status = "active"
    note: str = ""


@dataclass(slots=True)
class _Negation:
    surface: str
    heads: frozenset[str]
    modal: str | None
    first: int
    last: int

    @property
    def keys(self) -> frozenset[str]:
        return self.heads | ({self.modal} if self.modal else frozenset())


@dataclass(slots=True)
class _Reference:
    """A clause or document the text names: 'Section 4 of the Master Agreement'."""

    surface: str
    key: tuple[str, ...]  # its words, lower case and singular, without articles
    external: bool  # deferred to, or a clause of another document: the premise does not hold it
    deferral: str  # the words that hand the statement over to it ('as defined in'), or ''
    first: int  # the deferral's first token, else the reference's
    last: int
    sentence: int


@dataclass(slots=True)
class _Parsed:
    text: str
    tokens: list[_Tok]
    items: list[_Item] = field(default_factory=list)
    negations: list[_Negation] = field(default_factory=list)
    numbers: list[tuple[float, int]] = field(default_factory=list)
    references: list[_Reference] = field(default_factory=list)

    def surface(self, first: int, last: int) -> str:
        return self.text[self.tokens[first].start : self.tokens[last].end].rstrip("'" + _APOSTROPHE)

    def of_kind(self, kind: str) -> list[_Item]:
        return [item for item in self.items if item.kind == kind]


@dataclass(slots=True)
class _Unit:
    dim: str | None
    factor: float
    modifiers: list[str]
    first: int
    last: int
