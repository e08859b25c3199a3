"""Claim judges: does the cited context (premise) entail a claim (hypothesis)?

A judge answers ``entailed``, ``not_entailed`` or ``unknown`` with a reason a person can check.
``OfflineJudge`` is rule based and conservative: it says ``entailed`` only when every figure, date,
name and content word of the claim is found in one clause of the premise with nothing in the
premise (a negation, a condition, a hedge, a superseded value) that could undo it, and it says
``not_entailed`` only on concrete evidence (a figure, date, name or negation that is missing or
different). ``OpenAICompatibleJudge`` asks an LLM grader and turns every grader failure into
``unknown``. ``score_judge`` measures a judge against labelled pairs.
"""

import asyncio
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, get_args

import httpx

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


# ---------------------------------------------------------------------------------------------
# Scoring


def score_judge(results: Iterable[tuple[str, str]]) -> dict[str, dict[str, float]]:
    """Precision and recall per gold label from ``(gold_label, outcome)`` pairs.

    Mapping: ``entailed`` predicts ``entailment``; ``not_entailed`` predicts "not entailment",
    which is right for both ``contradiction`` and ``neutral``; ``unknown`` predicts nothing, so
    it lowers recall and never precision.

    Rows ``entailment``, ``contradiction``, ``neutral`` and ``not_entailment`` (contradiction and
    neutral pooled), each with ``support`` (pairs with that gold label), ``answered`` (of those,
    not ``unknown``), ``correct``, ``wrong``, ``recall`` (correct / support) and ``precision``.
    For ``entailment`` precision is correct / all ``entailed`` answers. A ``not_entailed`` answer
    does not say which of contradiction or neutral it is, so the ``contradiction``, ``neutral`` and
    ``not_entailment`` rows share one precision: the share of ``not_entailed`` answers given on a
    contradiction or neutral pair. Precision is NaN when the judge never made that prediction.
    """
    counts: dict[str, dict[str, int]] = {
        label: {outcome: 0 for outcome in OUTCOMES} for label in LABELS
    }
    for label, outcome in results:
        if label not in counts:
            raise ValueError(f"unknown gold label {label!r}; expected one of {LABELS}")
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}; expected one of {OUTCOMES}")
        counts[label][outcome] += 1

    entailed_answers = sum(c["entailed"] for c in counts.values())
    not_entailed_answers = sum(c["not_entailed"] for c in counts.values())
    negative_hits = counts["contradiction"]["not_entailed"] + counts["neutral"]["not_entailed"]
    negative_precision = _ratio(negative_hits, not_entailed_answers)

    def row(support: int, answered: int, correct: int, precision: float) -> dict[str, float]:
        return {
            "support": float(support),
            "answered": float(answered),
            "correct": float(correct),
            "wrong": float(answered - correct),
            "precision": precision,
            "recall": _ratio(correct, support) if support else math.nan,
        }

    scores: dict[str, dict[str, float]] = {}
    ent = counts["entailment"]
    scores["entailment"] = row(
        sum(ent.values()),
        ent["entailed"] + ent["not_entailed"],
        ent["entailed"],
        _ratio(ent["entailed"], entailed_answers),
    )
    for label in ("contradiction", "neutral"):
        c = counts[label]
        scores[label] = row(
            sum(c.values()),
            c["entailed"] + c["not_entailed"],
            c["not_entailed"],
            negative_precision,
        )
    pooled = [counts["contradiction"], counts["neutral"]]
    scores["not_entailment"] = row(
        sum(sum(c.values()) for c in pooled),
        sum(c["entailed"] + c["not_entailed"] for c in pooled),
        negative_hits,
        negative_precision,
    )
    return scores


def format_scores(scores: Mapping[str, Mapping[str, float]]) -> str:
    """A plain-text table of ``score_judge`` output."""
    header = f"{'label':<16}{'support':>8}{'answered':>9}{'wrong':>7}{'precision':>11}{'recall':>8}"
    lines = [header, "-" * len(header)]
    for label, row in scores.items():
        lines.append(
            f"{label:<16}{row['support']:>8.0f}{row['answered']:>9.0f}{row['wrong']:>7.0f}"
            f"{_fmt(row['precision']):>11}{_fmt(row['recall']):>8}"
        )
    return "\n".join(lines)


def _ratio(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else math.nan


def _fmt(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"


# ---------------------------------------------------------------------------------------------
# Offline judge: vocabulary

_PERMIT: Final = "=permission"
_OBLIGE: Final = "=obligation"
_WORD_CLASSES: Final[dict[str, str]] = {
    **dict.fromkeys(
        (
            "can",
            "may",
            "able",
            "allow",
            "allows",
            "allowed",
            "permit",
            "permits",
            "permitted",
            "permission",
        ),
        _PERMIT,
    ),
    **dict.fromkeys(
        (
            "must",
            "need",
            "needs",
            "needed",
            "require",
            "requires",
            "required",
            "mandatory",
            "obligatory",
            "obliged",
        ),
        _OBLIGE,
    ),
    **dict.fromkeys(
        ("get", "gets", "got", "getting", "receive", "receives", "received", "receiving"),
        "=receive",
    ),
    **dict.fromkeys(("stay", "stays", "stayed", "remain", "remains", "remained"), "=remain"),
    **dict.fromkeys(("start", "starts", "started", "begin", "begins", "began"), "=begin"),
}
_MODAL_KEYS: Final = frozenset({_PERMIT, _OBLIGE})

_STOPWORDS: Final = frozenset(
    """a an the is are was were be been being am has have had having do does did doing of in on
    at to for with by as into onto from that which who whom whose this these those there here it
    its they them their theirs he him his she her hers we us our ours you your yours i me my and
    or also will shall so such then now currently just very really both about per upon via what
    where how""".split()
)
_NEGATIONS: Final = frozenset(
    """not no never none nobody nothing neither nor without cannot hardly barely seldom rarely
    nowhere""".split()
)
_PROHIBITIONS: Final = frozenset(
    "prohibited forbidden banned disallowed prohibit prohibits forbid forbids unable".split()
)
_NOT_REQUIRED: Final = frozenset({"optional"})
_HEDGES: Final = frozenset(
    """might could should would possibly perhaps maybe likely probably expected planned proposed
    draft intended estimated""".split()
)
_CONDITIONALS: Final = frozenset(
    "if unless except excluding provided providing whether assuming when whenever".split()
)
_RELATIONS: Final = frozenset(
    """before after since until till prior than between later earlier instead rather
    previously formerly""".split()
)
_UNIVERSALS: Final = frozenset(
    "any every all anyone everyone anybody everybody always".split()
)
_SUPERSEDERS: Final[tuple[tuple[str, ...], ...]] = (
    ("instead", "of"),
    ("rather", "than"),
    ("previously",),
    ("formerly",),
)
_FUNCTION_WORDS: Final = (
    _STOPWORDS
    | _NEGATIONS
    | _PROHIBITIONS
    | _HEDGES
    | _CONDITIONALS
    | _RELATIONS
    | _UNIVERSALS
    | frozenset(_WORD_CLASSES)
    | frozenset("each some only more less fewer most least but per".split())
)
_NEGATION_FILLERS: Final = _STOPWORDS | frozenset(
    "always ever yet even necessarily longer also all any".split()
)

_UNITS_WORDS: Final[dict[str, int]] = {
    w: i
    for i, w in enumerate(
        """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
        fifteen sixteen seventeen eighteen nineteen""".split()
    )
}
_TENS_WORDS: Final[dict[str, int]] = {
    w: 10 * (i + 2)
    for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())
}
_MULTIPLIERS: Final[dict[str, float]] = {
    "thousand": 1e3,
    "million": 1e6,
    "billion": 1e9,
    "trillion": 1e12,
}
_DURATION_SECONDS: Final[dict[str, float]] = {
    "second": 1,
    "sec": 1,
    "minute": 60,
    "min": 60,
    "hour": 3600,
    "hr": 3600,
    "day": 86400,
    "week": 7 * 86400,
    "fortnight": 14 * 86400,
}
_CALENDAR_MONTHS: Final[dict[str, float]] = {
    "month": 1,
    "quarter": 3,
    "year": 12,
    "yr": 12,
    "decade": 120,
}
_CURRENCIES: Final[dict[str, str]] = {
    "euro": "EUR",
    "eur": "EUR",
    "€": "EUR",
    "dollar": "USD",
    "usd": "USD",
    "$": "USD",
    "gbp": "GBP",
    "£": "GBP",
}
_UNIT_MODIFIERS: Final[dict[str, str]] = {
    "business": "business",
    "working": "business",
    "calendar": "calendar",
    "consecutive": "consecutive",
    "full": "full",
    "additional": "additional",
    "extra": "additional",
    "further": "additional",
    "separate": "separate",
    "independent": "separate",
}
_BOUNDS: Final[tuple[tuple[tuple[str, ...], str], ...]] = (
    (("no", "less", "than"), "min"),
    (("no", "fewer", "than"), "min"),
    (("not", "less", "than"), "min"),
    (("no", "more", "than"), "max"),
    (("not", "more", "than"), "max"),
    (("no", "longer", "than"), "max"),
    (("at", "least"), "min"),
    (("minimum", "of"), "min"),
    (("more", "than"), "min"),
    (("greater", "than"), "min"),
    (("at", "most"), "max"),
    (("up", "to"), "max"),
    (("maximum", "of"), "max"),
    (("less", "than"), "max"),
    (("fewer", "than"), "max"),
    (("minimum",), "min"),
    (("over",), "min"),
    (("above",), "min"),
    (("exceeding",), "min"),
    (("maximum",), "max"),
    (("under",), "max"),
    (("below",), "max"),
    (("within",), "max"),
)
_APPROXIMATORS: Final = frozenset(
    "about around roughly approximately nearly almost circa some ~".split()
)
_MONTHS: Final[dict[str, int]] = {
    **{
        name: i + 1
        for i, name in enumerate(
            """january february march april may june july august september october november
            december""".split()
        )
    },
    **{
        abbr: i + 1
        for i, abbr in enumerate("jan feb mar apr _ jun jul aug sep oct nov dec".split())
        if abbr != "_"
    },
    "sept": 9,
}
_WEEKDAYS: Final = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday".split()
)
_CLAUSE_WORDS: Final = frozenset(
    "and but or while whereas although though however".split()
)
_IRREGULAR: Final[dict[str, str]] = {
    "paid": "pay",
    "got": "get",
    "gotten": "get",
    "made": "make",
    "sent": "send",
    "took": "take",
    "taken": "take",
    "built": "build",
    "kept": "keep",
    "held": "hold",
    "left": "leave",
    "gave": "give",
    "given": "give",
    "began": "begin",
    "begun": "begin",
    "wrote": "write",
    "written": "write",
    "bought": "buy",
    "sold": "sell",
    "told": "tell",
    "said": "say",
    "met": "meet",
    "lost": "lose",
    "spent": "spend",
    "chose": "choose",
    "chosen": "choose",
    "came": "come",
    "went": "go",
    "gone": "go",
    "saw": "see",
    "seen": "see",
    "knew": "know",
    "known": "know",
    "brought": "bring",
    "found": "find",
    "ran": "run",
    "led": "lead",
    "shown": "show",
}


def _stem(word: str) -> str:
    """Crude suffix stripping; both sides go through it, so it only has to be consistent."""
    w = _IRREGULAR.get(word, word)
    if w.endswith(("ies", "ied")) and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("ing") and len(w) >= 6:
        w = w[:-3]
    elif w.endswith("ed") and len(w) >= 5:
        w = w[:-2]
    elif w.endswith("es") and len(w) >= 5:
        w = w[:-2]
    elif w.endswith("s") and len(w) >= 4 and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    elif w.endswith("ly") and len(w) >= 6:
        w = w[:-2]
    if w.endswith("e") and len(w) >= 5:
        w = w[:-1]
    if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "aeiousl":
        w = w[:-1]
    return w


def _singular(word: str) -> str:
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ses", "xes", "ches", "shes")):
        return word[:-2]
    if len(word) > 2 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _word_key(norm: str) -> str:
    if norm in _WORD_CLASSES:
        return _WORD_CLASSES[norm]
    if norm in _PROHIBITIONS:
        return _PERMIT
    if norm in _NOT_REQUIRED:
        return _OBLIGE
    if norm.endswith("n't"):
        return _n_t_base_key(norm)
    return _stem(norm)


def _n_t_base_key(norm: str) -> str:
    base = {"can't": "can", "won't": "will", "shan't": "shall"}.get(norm, norm[:-3])
    return _WORD_CLASSES.get(base, _stem(base))


# ---------------------------------------------------------------------------------------------
# Offline judge: tokens

_TOKEN_RE: Final = re.compile(
    r"(?P<iso>\d{4}-\d{2}-\d{2})(?![\w-])"
    r"|(?P<num>\d+(?:[.,:]\d+)*(?:st|nd|rd|th)?)"
    r"|(?P<word>[^\W\d_]\w*(?:[-'’]\w+)*['’]?)"
    r"|(?P<punct>\S)"
)
_ORDINAL_RE: Final = re.compile(r"(?<=\d)(?:st|nd|rd|th)$")
_THOUSANDS_RE: Final = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_PLAIN_NUMBER_RE: Final = re.compile(r"^\d+(?:\.\d+)?$")
_CLOCK_RE: Final = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


@dataclass(slots=True)
class _Tok:
    text: str
    norm: str
    kind: str
    start: int
    end: int
    sentence: int = 0
    clause: int = 0
    initial: bool = False


def _normalise_word(text: str) -> str:
    norm = text.lower().replace("’", "'")
    if norm.endswith("'s"):
        return norm[:-2]
    return norm.rstrip("'")


def _tokenise(text: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    for match in _TOKEN_RE.finditer(text):
        kind = match.lastgroup or "punct"
        raw = match.group()
        start = match.start()
        if kind == "word" and "-" in raw and not any(ch.isdigit() for ch in raw):
            offset = start
            for part in raw.split("-"):
                if part:
                    tokens.append(_Tok(part, _normalise_word(part), "word", offset, offset + len(part)))
                offset += len(part) + 1
            continue
        norm = _normalise_word(raw) if kind == "word" else raw.lower()
        tokens.append(_Tok(raw, norm, kind, start, match.end()))

    sentence = clause = 0
    at_start = True
    previous_end = 0
    for tok in tokens:
        if "\n\n" in text[previous_end : tok.start] and not at_start:
            sentence += 1
            clause += 1
            at_start = True
        previous_end = tok.end
        tok.sentence, tok.clause = sentence, clause
        if tok.kind in ("word", "num", "iso") and at_start:
            tok.initial = True
            at_start = False
        if tok.kind == "punct" and tok.norm in ".!?":
            sentence += 1
            clause += 1
            at_start = True
        elif (tok.kind == "punct" and tok.norm in ";:") or tok.norm in _CLAUSE_WORDS:
            clause += 1
    return tokens


def _parse_number(text: str) -> float | None:
    cleaned = _ORDINAL_RE.sub("", text)
    if _THOUSANDS_RE.match(cleaned):
        return float(cleaned.replace(",", ""))
    if _PLAIN_NUMBER_RE.match(cleaned):
        return float(cleaned)
    return None


def _small_int(tok: _Tok, low: int, high: int) -> int | None:
    if tok.kind != "num":
        return None
    value = _parse_number(tok.norm)
    if value is None or value != int(value) or not low <= value <= high:
        return None
    return int(value)


# ---------------------------------------------------------------------------------------------
# Offline judge: parsed items


@dataclass(slots=True)
class _Quantity:
    values: tuple[float, float]  # as written: (first, second); equal unless a range
    bound: str  # "eq" | "min" | "max"
    approx: bool
    modifiers: frozenset[str]
    from_to: bool
    parts: tuple[str, str, str]  # surfaces of the first number, second number and unit

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
    kind: str  # quantity | label | bare | date | weekday | clock | literal | entity | word
    key: str
    surface: str
    clause: int
    first: int
    last: int
    quantity: _Quantity | None = None
    date: tuple[int | None, int | None, int | None] = (None, None, None)
    words: tuple[str, ...] = ()
    status: str = "active"  # active | superseded | endpoint
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
class _Parsed:
    text: str
    tokens: list[_Tok]
    items: list[_Item] = field(default_factory=list)
    negations: list[_Negation] = field(default_factory=list)
    numbers: list[tuple[float, int]] = field(default_factory=list)

    def surface(self, first: int, last: int) -> str:
        return self.text[self.tokens[first].start : self.tokens[last].end].rstrip("'’")

    def of_kind(self, kind: str) -> list[_Item]:
        return [item for item in self.items if item.kind == kind]


class _Parser:
    def __init__(self, text: str, *, premise: bool) -> None:
        self.parsed = _Parsed(text, _tokenise(text))
        self.tokens = self.parsed.tokens
        self.premise = premise
        self.consumed = [False] * len(self.tokens)

    def run(self) -> _Parsed:
        self._dates()
        self._weekdays_clocks_literals()
        self._phrases()
        self._quantities()
        self._entities()
        self._negations()
        self._words()
        self._numbers()
        return self.parsed

    def norm(self, index: int) -> str:
        return self.tokens[index].norm if 0 <= index < len(self.tokens) else ""

    def free(self, index: int) -> bool:
        return 0 <= index < len(self.tokens) and not self.consumed[index]

    def add(self, kind: str, key: str, first: int, last: int, **extra: Any) -> _Item:
        item = _Item(
            kind,
            key,
            self.parsed.surface(first, last),
            self.tokens[first].clause,
            first,
            last,
            **extra,
        )
        self.parsed.items.append(item)
        for index in range(first, last + 1):
            self.consumed[index] = True
        return item

    def _is_month(self, index: int) -> bool:
        tok = self.tokens[index]
        if tok.kind != "word" or not tok.text[:1].isupper() or tok.norm not in _MONTHS:
            return False
        if tok.norm != "may":
            return True
        return not tok.initial or self.tokens_near_number(index)

    def tokens_near_number(self, index: int) -> bool:
        return any(
            0 <= j < len(self.tokens) and self.tokens[j].kind == "num" for j in (index - 1, index + 1)
        )

    def _dates(self) -> None:
        for i, tok in enumerate(self.tokens):
            if tok.kind == "iso":
                year, month, day = (int(part) for part in tok.norm.split("-"))
                self.add("date", "date", i, i, date=(day, month, year))
        for i in range(len(self.tokens)):
            if self.consumed[i] or not self._is_month(i):
                continue
            day: int | None = None
            year: int | None = None
            first = last = i
            if self.free(i - 1) and (d := _small_int(self.tokens[i - 1], 1, 31)) is not None:
                day, first = d, i - 1
            elif (
                self.norm(i - 1) == "of"
                and self.free(i - 2)
                and (d := _small_int(self.tokens[i - 2], 1, 31)) is not None
            ):
                day, first = d, i - 2
                if self.norm(i - 3) == "the":
                    first = i - 3
            j = i + 1
            if (
                day is None
                and self.free(j)
                and (d := _small_int(self.tokens[j], 1, 31)) is not None
                and len(_ORDINAL_RE.sub("", self.tokens[j].norm)) <= 2
            ):
                day, last = d, j
                j += 1
                if self.norm(j) == "," and self.free(j + 1):
                    j += 1
            if self.free(j) and (y := _small_int(self.tokens[j], 1000, 2999)) is not None:
                year, last = y, j
            self.add("date", "date", first, last, date=(day, _MONTHS[self.tokens[i].norm], year))

    def _weekdays_clocks_literals(self) -> None:
        for i, tok in enumerate(self.tokens):
            if self.consumed[i]:
                continue
            if tok.kind == "word":
                singular = _singular(tok.norm)
                if singular in _WEEKDAYS and tok.text[:1].isupper():
                    self.add("weekday", singular, i, i)
                elif any(ch.isdigit() for ch in tok.text) or "_" in tok.text:
                    self.add("literal", tok.norm, i, i)
            elif tok.kind == "num":
                clock = _CLOCK_RE.match(tok.norm)
                meridiem = self.norm(i + 1).replace(".", "")
                if clock:
                    hour, minute = int(clock.group(1)), int(clock.group(2))
                    last = i
                    if meridiem in ("am", "pm") and hour <= 12:
                        hour = hour % 12 + (12 if meridiem == "pm" else 0)
                        last = i + 1
                    self.add("clock", f"{hour:02d}:{minute:02d}", i, last)
                elif meridiem in ("am", "pm") and (h := _small_int(tok, 1, 12)) is not None:
                    hour = h % 12 + (12 if meridiem == "pm" else 0)
                    self.add("clock", f"{hour:02d}:00", i, i + 1)
                elif tok.norm.count(".") >= 2 or (":" in tok.norm) or (
                    "," in tok.norm and _parse_number(tok.norm) is None
                ):
                    self.add("literal", tok.norm, i, i)

    def _phrases(self) -> None:
        """Multiplier phrases: 'time and a half', 'double the', 'twice as', 'half the'."""
        for i in range(len(self.tokens)):
            if not self.free(i):
                continue
            words = tuple(self.norm(j) for j in range(i, i + 4))
            if words == ("time", "and", "a", "half"):
                self._add_times(i, i + 3, 1.5)
            elif words[0] in ("double", "twice", "triple", "half") and words[1] in (
                "the",
                "as",
                "that",
            ):
                factor = {"double": 2.0, "twice": 2.0, "triple": 3.0, "half": 0.5}[words[0]]
                self._add_times(i, i, factor)

    def _add_times(self, first: int, last: int, factor: float) -> None:
        surface = self.parsed.surface(first, last)
        quantity = _Quantity(
            (factor, factor), "eq", False, frozenset(), False, (surface, surface, "")
        )
        self.add("quantity", "times", first, last, quantity=quantity)

    def _read_number(self, i: int) -> tuple[float, int] | None:
        """The number starting at token i (digits or words) and the index after it."""
        if not self.free(i):
            return None
        tok = self.tokens[i]
        if tok.kind == "num":
            value = _parse_number(tok.norm)
            if value is None:
                return None
            j = i + 1
        elif tok.norm in _UNITS_WORDS or tok.norm in _TENS_WORDS:
            value, j = 0.0, i
            while self.free(j) and self.norm(j) in (*_UNITS_WORDS, *_TENS_WORDS, "hundred"):
                word = self.norm(j)
                if word == "hundred":
                    value *= 100
                else:
                    value += _UNITS_WORDS.get(word, 0) + _TENS_WORDS.get(word, 0)
                j += 1
        else:
            return None
        if self.free(j) and self.norm(j) in _MULTIPLIERS:
            value *= _MULTIPLIERS[self.norm(j)]
            j += 1
        return value, j

    def _quantities(self) -> None:
        i = 0
        while i < len(self.tokens):
            i = self._quantity_at(i) or i + 1

    def _quantity_at(self, i: int) -> int | None:
        tok = self.tokens[i]
        word_number = tok.kind == "word"
        first_read = self._read_number(i)
        if first_read is None and tok.norm in ("a", "an") and self.free(i):
            if (
                _singular(self.norm(i + 1)) in {**_DURATION_SECONDS, **_CALENDAR_MONTHS}
                and self.norm(i - 1) not in ("once", "twice", "thrice", "times", "time")
            ):
                first_read = (1.0, i + 1)
        if first_read is None:
            return None
        first_value, j = first_read
        first_number_end = j - 1
        second_value = first_value
        second_start = second_end = -1
        from_to = False
        if self.norm(j) in ("to", "-", "–") or (
            self.norm(j) == "and" and self.norm(i - 1) == "between"
        ):
            second_read = self._read_number(j + 1)
            if second_read is not None:
                second_start = j + 1
                second_value, j = second_read
                second_end = j - 1
                from_to = self.norm(i - 1) == "from"
        if self.norm(j) == "-" and self.tokens[j].kind == "punct" and self.free(j + 1):
            j += 1
        modifiers: list[str] = []
        while self.free(j) and self.norm(j) in _UNIT_MODIFIERS:
            modifiers.append(_UNIT_MODIFIERS[self.norm(j)])
            j += 1
        unit_first = j
        currency = self._currency_before(i)
        dim: str | None = None
        factor = 1.0
        if currency:
            dim = f"currency:{currency}"
            j -= 1
        elif self.norm(j) in ("%", "percent"):
            dim = "percent"
        elif self.norm(j) == "per" and self.norm(j + 1) == "cent":
            dim, j = "percent", j + 1
        elif self.free(j) and self.tokens[j].kind == "word" and self.norm(j) not in _FUNCTION_WORDS:
            dim, factor = _unit_dimension(self.norm(j))
        else:
            j -= 1
        has_unit = dim is not None
        if has_unit and self.norm(j + 1) in ("per", "/"):
            k = j + 2
            if self.norm(k) in ("a", "an", "each", "every"):
                k += 1
            per = _singular(self.norm(k))
            if per in _DURATION_SECONDS or per in _CALENDAR_MONTHS:
                per_dim = "s" if per in _DURATION_SECONDS else "month"
                divisor = _DURATION_SECONDS.get(per) or _CALENDAR_MONTHS[per]
                dim = f"{dim}/{per_dim}"
                factor /= divisor
                j = k
        if word_number and not has_unit and self.norm(first_number_end) not in _MULTIPLIERS:
            return None
        if tok.norm in ("a", "an") and not has_unit:
            return None

        start = i
        bound = "eq"
        approx = False
        if currency:
            start = i - 1
        for phrase, kind in _BOUNDS:
            n = len(phrase)
            if all(self.norm(start - n + k) == phrase[k] for k in range(n)) and all(
                self.free(start - n + k) for k in range(n)
            ):
                bound, start = kind, start - n
                break
        if self.norm(start - 1) in _APPROXIMATORS and self.free(start - 1):
            approx, start = True, start - 1
        if self.norm(j + 1) == "or" and self.norm(j + 2) in ("more", "less", "fewer", "longer"):
            bound = "min" if self.norm(j + 2) == "more" else "max"
            j += 2

        if dim is None:
            label_index = i - 1
            if (
                self.free(label_index)
                and self.tokens[label_index].kind == "word"
                and self.norm(label_index) not in _FUNCTION_WORDS
                and bound == "eq"
                and not approx
            ):
                dim = f"label:{_stem(self.norm(label_index))}"
            else:
                dim = "bare"
        unit_text = (
            self.parsed.surface(unit_first, j) if has_unit and j >= unit_first and not currency else ""
        )
        parts = (
            self.parsed.surface(i, first_number_end),
            self.parsed.surface(second_start, second_end) if second_start >= 0 else "",
            unit_text,
        )
        quantity = _Quantity(
            (first_value * factor, second_value * factor),
            bound,
            approx,
            frozenset(modifiers),
            from_to,
            parts,
        )
        kind = "quantity" if has_unit else ("bare" if dim == "bare" else "label")
        self.add(kind, dim, start, j, quantity=quantity)
        if from_to:
            self.consumed[i - 1] = True
        return j + 1

    def _currency_before(self, i: int) -> str | None:
        if i > 0 and self.tokens[i - 1].kind == "punct":
            return _CURRENCIES.get(self.tokens[i - 1].norm)
        return None

    def _entities(self) -> None:
        i = 0
        while i < len(self.tokens):
            if not self._capitalised(i):
                i += 1
                continue
            j = i
            while self._capitalised(j + 1) and self.tokens[j + 1].sentence == self.tokens[i].sentence:
                j += 1
            tok = self.tokens[i]
            single_initial = tok.initial and j == i
            acronym = len(tok.text) >= 2 and tok.text.isupper()
            camel = any(ch.isupper() for ch in tok.text[1:])
            if not single_initial or acronym or camel:
                words = tuple(t.norm for t in self.tokens[i : j + 1])
                self.add("entity", " ".join(words), i, j, words=words)
            i = j + 1

    def _capitalised(self, index: int) -> bool:
        if not self.free(index):
            return False
        tok = self.tokens[index]
        return (
            tok.kind == "word"
            and tok.text[:1].isupper()
            and tok.norm not in _FUNCTION_WORDS
            and tok.norm not in _NEGATIONS
        )

    def _negations(self) -> None:
        for i, tok in enumerate(self.tokens):
            if tok.kind != "word":
                continue
            norm = tok.norm
            modal: str | None = None
            if norm in ("no", "not") and (
                self.norm(i + 1) == "only"
                or (
                    self.norm(i + 1) in ("more", "less", "fewer", "later", "earlier", "longer")
                    and self.norm(i + 2) == "than"
                )
            ):
                continue
            if norm in _PROHIBITIONS:
                modal = _PERMIT
            elif norm in _NOT_REQUIRED:
                modal = _OBLIGE
            elif norm == "cannot":
                modal = _PERMIT
            elif norm.endswith("n't"):
                base = _n_t_base_key(norm)
                modal = base if base in _MODAL_KEYS else None
            elif norm not in _NEGATIONS:
                continue
            first = i
            before = _WORD_CLASSES.get(self.norm(i - 1))
            if modal is None and before in _MODAL_KEYS:
                modal, first = before, i - 1
            heads: list[str] = []
            last = i
            k = i + 1
            while k < len(self.tokens) and k <= i + 5 and len(heads) < 2:
                nxt = self.tokens[k]
                if nxt.kind == "punct" or nxt.clause != tok.clause:
                    break
                if nxt.norm in _NEGATION_FILLERS and not heads:
                    k += 1
                    continue
                if nxt.kind != "word" or nxt.norm in _FUNCTION_WORDS - frozenset(_WORD_CLASSES):
                    break
                heads.append(_word_key(nxt.norm))
                last = k
                k += 1
            if norm in _PROHIBITIONS or norm in _NOT_REQUIRED:
                heads = [modal or _PERMIT, *heads[:0]]
            self.parsed.negations.append(
                _Negation(self.parsed.surface(first, last), frozenset(heads), modal, first, last)
            )

    def _words(self) -> None:
        for i, tok in enumerate(self.tokens):
            if tok.kind != "word" or tok.norm in _STOPWORDS:
                continue
            if self.consumed[i] and not self.premise:
                continue
            if tok.norm in _NEGATIONS or (tok.norm.endswith("n't") and not self.premise):
                if tok.norm != "cannot" and not tok.norm.endswith("n't"):
                    continue
                if _n_t_base_key(tok.norm if tok.norm != "cannot" else "can't") not in _MODAL_KEYS:
                    continue
            if tok.norm in _NEGATIONS and tok.norm != "cannot":
                continue
            key = _PERMIT if tok.norm == "cannot" else _word_key(tok.norm)
            self.parsed.items.append(_Item("word", key, tok.text, tok.clause, i, i))

    def _numbers(self) -> None:
        for item in self.parsed.items:
            if item.quantity is not None and item.kind in ("bare", "label", "quantity"):
                for part in item.quantity.parts[:2]:
                    value = _parse_number(part) if part else None
                    if value is not None:
                        self.parsed.numbers.append((value, item.clause))
            if item.kind == "date":
                for value in item.date:
                    if value is not None:
                        self.parsed.numbers.append((float(value), item.clause))
        for tok in self.tokens:
            if tok.kind == "num" and (value := _parse_number(tok.norm)) is not None:
                self.parsed.numbers.append((value, tok.clause))


def _unit_dimension(word: str) -> tuple[str, float]:
    singular = _singular(word)
    if singular in _DURATION_SECONDS:
        return "duration", _DURATION_SECONDS[singular]
    if singular in _CALENDAR_MONTHS:
        return "calendar", _CALENDAR_MONTHS[singular]
    if singular in _CURRENCIES:
        return f"currency:{_CURRENCIES[singular]}", 1.0
    if singular in ("time", "x"):
        return "times", 1.0
    return f"unit:{_stem(singular)}", 1.0


def _parse(text: str, *, premise: bool) -> _Parsed:
    parsed = _Parser(text, premise=premise).run()
    if premise:
        _mark_changes(parsed)
    return parsed


_CHANGE_STEMS: Final = frozenset(
    _stem(word)
    for word in """moved changed rescheduled postponed switched shifted updated revised replaced
    reduced increased raised lowered extended shortened cut amended pushed delayed downgraded
    upgraded migrated converted renamed relocated adjusted brought""".split()
)


def _mark_changes(parsed: _Parsed) -> None:
    """Mark values a premise says were replaced ('moved from A to B') or that bound a range."""
    tokens = parsed.tokens
    for item in parsed.items:
        q = item.quantity
        if item.kind != "quantity" or q is None or not q.from_to:
            continue
        verb = _change_verb(parsed, tokens[item.first].sentence)
        if verb is None:
            continue
        old, new = q.parts[0], q.parts[1]
        unit = f" {q.parts[2]}" if q.parts[2] else ""
        note = f"{verb} from '{old}{unit}' to '{new}{unit}'"
        q.values = (q.values[1], q.values[1])
        q.parts = (new, "", q.parts[2])
        item.note = note
        superseded = _Item(
            item.kind,
            item.key,
            f"{old}{unit}",
            item.clause,
            item.first,
            item.last,
            quantity=_Quantity(
                (q.values[0], q.values[0]), q.bound, q.approx, q.modifiers, False, q.parts
            ),
            status="superseded",
            note=note,
        )
        old_value = _parse_number(old)
        if old_value is not None and superseded.quantity is not None:
            scale = q.low / (_parse_number(new) or 1.0) if _parse_number(new) else 1.0
            superseded.quantity.values = (old_value * scale, old_value * scale)
        parsed.items.append(superseded)

    for i, tok in enumerate(tokens):
        if tok.norm != "from" or any(
            it.first <= i <= it.last and it.quantity is not None and it.quantity.from_to
            for it in parsed.items
        ):
            continue
        to = next(
            (
                k
                for k in range(i + 2, min(i + 7, len(tokens)))
                if tokens[k].norm in ("to", "until", "till", "through", "–")
                and tokens[k].sentence == tok.sentence
            ),
            None,
        )
        if to is None:
            continue
        end = to
        for k in range(to + 1, min(to + 6, len(tokens))):
            if (
                tokens[k].kind == "punct"
                or tokens[k].clause != tokens[to].clause
                or tokens[k].norm in ("at", "on", "in", "for", "by", "with", "and", "but")
            ):
                break
            end = k
        if end == to:
            continue
        verb = _change_verb(parsed, tok.sentence)
        old = parsed.surface(i + 1, to - 1)
        new = parsed.surface(to + 1, end)
        for item in parsed.items:
            if item.status != "active":
                continue
            if i < item.first < to:
                if verb:
                    item.status, item.note = "superseded", f"{verb} from '{old}' to '{new}'"
                else:
                    item.status, item.note = "endpoint", f"from '{old}' to '{new}'"
            elif to < item.first <= end and not verb:
                item.status, item.note = "endpoint", f"from '{old}' to '{new}'"

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
            if end < i + n:
                continue
            note = f"'{parsed.surface(i, end)}'"
            for item in parsed.items:
                if item.status == "active" and i + n <= item.first <= end:
                    item.status, item.note = "superseded", note


def _change_verb(parsed: _Parsed, sentence: int) -> str | None:
    for tok in parsed.tokens:
        if tok.sentence == sentence and tok.kind == "word" and _stem(tok.norm) in _CHANGE_STEMS:
            return tok.text.lower()
    return None


# ---------------------------------------------------------------------------------------------
# Offline judge: comparison


@dataclass(slots=True)
class _Verdict:
    conflicts: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    uncovered: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    clause_sets: list[set[int]] = field(default_factory=list)
    matched_tokens: set[int] = field(default_factory=set)

    def match(self, hyp: _Item, found: list[_Item]) -> None:
        self.clause_sets.append({item.clause for item in found})
        for item in found:
            self.matched_tokens.update(range(item.first, item.last + 1))
        shown = found[0].surface
        if hyp.kind == "word" and hyp.surface.lower() == shown.lower():
            return
        if hyp.kind == "word" or hyp.surface.lower() == shown.lower():
            self.evidence.append(
                f"'{hyp.surface}'" if hyp.surface.lower() == shown.lower() else f"'{hyp.surface}' ~ '{shown}'"
            )
        else:
            self.evidence.append(f"'{hyp.surface}' = '{shown}'")


def _compare_quantities(h: _Quantity, p: _Quantity) -> str:
    """match | near (consistent, not stated) | contra."""
    if h.approx or p.approx or h.modifiers != p.modifiers:
        slack = 2.0 if h.modifiers != p.modifiers else 1.5
        if h.high < p.low / slack or h.low > p.high * slack:
            return "contra"
        return "near"
    if math.isclose(h.low, p.low, rel_tol=1e-9) and math.isclose(h.high, p.high, rel_tol=1e-9):
        return "match" if h.bound == p.bound else "near"
    if p.is_range or h.is_range:
        overlap = h.low <= p.high and p.low <= h.high
        return "near" if overlap else "contra"
    if h.bound == "eq" and p.bound == "min":
        return "near" if h.low >= p.low else "contra"
    if h.bound == "eq" and p.bound == "max":
        return "near" if h.low <= p.low else "contra"
    return "contra"


def _check_quantity(v: _Verdict, item: _Item, p: _Parsed) -> None:
    assert item.quantity is not None
    same = [q for q in p.items if q.key == item.key and q.quantity is not None]
    results = [(q, _compare_quantities(item.quantity, q.quantity)) for q in same if q.quantity]
    active = [(q, r) for q, r in results if q.status == "active"]
    matches = [q for q, r in active if r == "match"]
    if matches:
        others = [q.surface for q, r in active if r != "match"]
        if others:
            v.blockers.append(
                f"the premise gives more than one figure like '{item.surface}' "
                f"({_quoted([matches[0].surface, *others])})"
            )
        v.match(item, matches)
        return
    superseded = [q for q, r in results if q.status == "superseded" and r == "match"]
    if superseded:
        v.conflicts.append(f"claim says '{item.surface}' but the premise says {superseded[0].note}")
        return
    endpoints = [q for q, r in results if q.status == "endpoint" and r != "contra"]
    near = [q for q, r in active if r == "near"] + endpoints
    if near:
        v.blockers.append(
            f"the claim says '{item.surface}' where the premise says {_quoted([q.surface for q in near])}"
        )
        return
    contra = [q for q, r in active if r == "contra"]
    if contra:
        v.conflicts.append(
            f"claim says '{item.surface}' but the premise says {_quoted([q.surface for q in contra])}"
        )
        return
    _missing_number(v, item, p)


def _check_label(v: _Verdict, item: _Item, p: _Parsed) -> None:
    assert item.quantity is not None
    same = [q for q in p.items if q.kind == "label" and q.key == item.key and q.quantity]
    matches = [
        q
        for q in same
        if q.quantity and math.isclose(q.quantity.low, item.quantity.low) and q.status == "active"
    ]
    if matches:
        v.match(item, matches)
        return
    if same:
        v.conflicts.append(
            f"claim says '{item.surface}' but the premise says {_quoted([q.surface for q in same])}"
        )
        return
    _missing_number(v, item, p)


def _missing_number(v: _Verdict, item: _Item, p: _Parsed) -> None:
    assert item.quantity is not None
    value = _parse_number(item.quantity.parts[0])
    if value is not None and any(math.isclose(value, n) for n, _ in p.numbers):
        if item.kind == "bare":
            found_clauses = {c for n, c in p.numbers if math.isclose(value, n)}
            v.clause_sets.append(found_clauses)
            v.evidence.append(f"'{item.surface}'")
            return
        v.blockers.append(
            f"the premise has the number in '{item.surface}' but not as the claim uses it"
        )
        return
    v.conflicts.append(f"claim says '{item.surface}', which the premise does not mention")


def _check_date(v: _Verdict, item: _Item, p: _Parsed) -> None:
    dates = [d for d in p.of_kind("date")]

    def covers(d: _Item) -> bool:
        return all(h is None or h == x for h, x in zip(item.date, d.date, strict=True))

    def conflicts(d: _Item) -> bool:
        return any(
            h is not None and x is not None and h != x for h, x in zip(item.date, d.date, strict=True)
        )

    active = [d for d in dates if d.status == "active"]
    matches = [d for d in active if covers(d)]
    if matches:
        others = [d.surface for d in active if conflicts(d)]
        if others:
            v.blockers.append(f"the premise gives more than one date ({_quoted([matches[0].surface, *others])})")
        v.match(item, matches)
        return
    superseded = [d for d in dates if d.status == "superseded" and covers(d)]
    if superseded:
        v.conflicts.append(f"claim says '{item.surface}' but the premise says {superseded[0].note}")
        return
    endpoints = [d for d in dates if d.status == "endpoint" and covers(d)]
    if endpoints:
        v.blockers.append(f"'{item.surface}' is one end of a range in the premise ({endpoints[0].note})")
        return
    differing = [d.surface for d in active if conflicts(d)]
    if differing:
        v.conflicts.append(f"claim says '{item.surface}' but the premise says {_quoted(differing)}")
        return
    vaguer = [d.surface for d in active]
    if vaguer:
        v.conflicts.append(f"claim says '{item.surface}' but the premise only says {_quoted(vaguer)}")
        return
    v.conflicts.append(f"claim says '{item.surface}', which the premise does not mention")


def _check_keyed(v: _Verdict, item: _Item, p: _Parsed, noun: str) -> None:
    """Weekdays, clock times and literal identifiers: the same key must be in the premise."""
    same_kind = p.of_kind(item.kind)
    found = [x for x in same_kind if x.key == item.key]
    active = [x for x in found if x.status == "active"]
    if active:
        others = sorted({x.surface for x in same_kind if x.status == "active" and x.key != item.key})
        if others and item.kind != "literal":
            v.blockers.append(f"the premise gives more than one {noun} ({_quoted([active[0].surface, *others])})")
        v.match(item, active)
        return
    if found and found[0].status == "superseded":
        v.conflicts.append(f"claim says '{item.surface}' but the premise says {found[0].note}")
        return
    if found:
        v.blockers.append(f"'{item.surface}' is one end of a range in the premise ({found[0].note})")
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
    norms = [tok.norm for tok in p.tokens]
    n = len(item.words)
    starts = [i for i in range(len(norms) - n + 1) if tuple(norms[i : i + n]) == item.words]
    if starts:
        found = [
            _Item("entity", item.key, p.surface(i, i + n - 1), p.tokens[i].clause, i, i + n - 1)
            for i in starts
        ]
        superseded = [
            x for x in p.items if x.status == "superseded" and any(x.first <= i <= x.last for i in starts)
        ]
        if superseded and len(superseded) == len(starts):
            v.conflicts.append(f"claim says '{item.surface}' but the premise says {superseded[0].note}")
            return
        names = {x.key for x in p.of_kind("entity") if x.status == "active"}
        if len(names - {item.key}) >= 1 and len(names) >= 2:
            v.blockers.append(
                "the premise names more than one party "
                f"({_quoted(sorted({x.surface for x in p.of_kind('entity')}))})"
            )
        v.match(item, found)
        return
    named = [x.surface for x in p.of_kind("entity")]
    hint = f" (the premise names {_quoted(named)})" if named else ""
    v.conflicts.append(f"claim names '{item.surface}', which the premise does not mention{hint}")


def _check_word(v: _Verdict, item: _Item, p: _Parsed) -> None:
    found = [x for x in p.of_kind("word") if x.key == item.key]
    active = [x for x in found if x.status == "active"]
    if active:
        v.match(item, active)
    elif found and found[0].status == "superseded":
        v.conflicts.append(f"claim says '{item.surface}' but the premise says {found[0].note}")
    elif found:
        v.blockers.append(f"'{item.surface}' is one end of a range in the premise ({found[0].note})")
    else:
        v.uncovered.append(item.surface)


def _quoted(surfaces: Iterable[str]) -> str:
    unique = list(dict.fromkeys(surfaces))
    return " and ".join(f"'{s}'" for s in unique)


def _check_negations(v: _Verdict, h: _Parsed, p: _Parsed) -> None:
    aligned_premise: set[int] = set()
    for neg in h.negations:
        partners = [i for i, pn in enumerate(p.negations) if pn.keys & neg.keys]
        if partners:
            aligned_premise.update(partners)
            continue
        if p.negations:
            v.conflicts.append(
                f"the claim says '{neg.surface}' but the premise does not negate it "
                f"(its negation is {_quoted(pn.surface for pn in p.negations)})"
            )
        else:
            v.conflicts.append(f"the claim says '{neg.surface}' but the premise has no negation")
    hyp_words = [x for x in h.of_kind("word") if not any(n.first <= x.first <= n.last for n in h.negations)]
    for index, neg in enumerate(p.negations):
        if index in aligned_premise:
            continue
        targets = neg.heads or (frozenset({neg.modal}) if neg.modal else frozenset())
        hits = [w.surface for w in hyp_words if w.key in targets]
        if hits:
            v.conflicts.append(f"the premise says '{neg.surface}' but the claim says {_quoted(hits)}")
        else:
            v.blockers.append(f"the premise says '{neg.surface}', a negation the claim does not carry")


def _check_only(v: _Verdict, h: _Parsed, p: _Parsed) -> None:
    universals = [i for i, tok in enumerate(h.tokens) if tok.norm in _UNIVERSALS]
    if not universals:
        return
    hyp_keys = {x.key for x in h.items if x.kind == "word"}
    for i, tok in enumerate(p.tokens):
        if tok.norm != "only":
            continue
        target = next(
            (k for k in range(i + 1, min(i + 4, len(p.tokens))) if p.tokens[k].norm not in _STOPWORDS),
            None,
        )
        if target is None or p.tokens[target].kind != "word":
            continue
        if _word_key(p.tokens[target].norm) in hyp_keys:
            continue
        u = universals[0]
        claim = h.surface(u, min(u + 1, len(h.tokens) - 1))
        v.conflicts.append(
            f"the premise says '{p.surface(i, target)}' but the claim says '{claim}'"
        )
        return


def _check_premise_hazards(v: _Verdict, h: _Parsed, p: _Parsed) -> None:
    hyp_keys = {x.key for x in h.items if x.kind == "word"} | {
        _word_key(tok.norm) for tok in h.tokens if tok.kind == "word"
    }
    hedges = [
        x.surface
        for x in p.of_kind("word")
        if (x.key in _MODAL_KEYS or x.surface.lower() in _HEDGES) and x.key not in hyp_keys
    ]
    if hedges:
        v.blockers.append(f"the premise qualifies it with {_quoted(hedges)}, which the claim drops")
    for i, tok in enumerate(p.tokens):
        if tok.norm in _CONDITIONALS and _word_key(tok.norm) not in hyp_keys:
            v.blockers.append(f"the premise is conditional ('{tok.text}')")
        elif (
            tok.norm in _RELATIONS
            and _word_key(tok.norm) not in hyp_keys
            and any(
                k in v.matched_tokens and p.tokens[k].clause == tok.clause
                for k in range(i + 1, min(i + 5, len(p.tokens)))
            )
        ):
            v.blockers.append(
                f"the premise says '{p.surface(i, min(i + 3, len(p.tokens) - 1))}', "
                "a relation the claim does not state"
            )


def _judge_offline(premise: str, hypothesis: str) -> tuple[Outcome, str]:
    p = _parse(premise, premise=True)
    h = _parse(hypothesis, premise=False)
    if not h.items and not h.negations:
        return "unknown", "the claim has nothing to check"
    v = _Verdict()
    for item in h.items:
        if item.kind == "quantity":
            _check_quantity(v, item, p)
        elif item.kind == "label":
            _check_label(v, item, p)
        elif item.kind == "bare":
            _missing_number(v, item, p)
        elif item.kind == "date":
            _check_date(v, item, p)
        elif item.kind == "weekday":
            _check_keyed(v, item, p, "day of the week")
        elif item.kind == "clock":
            _check_keyed(v, item, p, "time of day")
        elif item.kind == "literal":
            _check_keyed(v, item, p, "identifier")
        elif item.kind == "entity":
            _check_entity(v, item, p)
        else:
            _check_word(v, item, p)
    _check_negations(v, h, p)
    _check_only(v, h, p)
    if v.conflicts:
        return "not_entailed", "; ".join(dict.fromkeys(v.conflicts))

    _check_premise_hazards(v, h, p)
    if v.uncovered:
        v.blockers.insert(0, f"the premise does not mention {_quoted(v.uncovered)}")
    if v.clause_sets and not set.intersection(*v.clause_sets):
        v.blockers.append("the claim joins facts from different parts of the premise")
    if not v.clause_sets:
        v.blockers.append("the claim has nothing the premise can be matched against")
    if v.blockers:
        return "unknown", "not sure: " + "; ".join(dict.fromkeys(v.blockers))
    shown = ", ".join(dict.fromkeys(v.evidence)) or "the same words"
    return "entailed", f"the premise states every part of the claim: {shown}"


class OfflineJudge:
    """Rule-based judge: no network, no model; ``entailed`` only when sure, else explains why not.

    It never reads world knowledge beyond a small table (number words, unit conversions such as
    two weeks = 14 days, 'time and a half' = 1.5 times, a few synonym groups such as need/require),
    so paraphrases it cannot verify come back ``unknown``.
    """

    name: str = "offline"
    version: str = "1"

    async def judge(self, premise: str, hypothesis: str) -> Judgement:
        return self.judge_sync(premise, hypothesis)

    def judge_sync(self, premise: str, hypothesis: str) -> Judgement:
        """The same verdict without an event loop; the rules do no I/O."""
        outcome, reason = _judge_offline(premise, hypothesis)
        return Judgement(outcome, reason, self.name, self.version)


# ---------------------------------------------------------------------------------------------
# LLM grader

PROMPT_VERSION: Final = "1"
_SYSTEM_PROMPT: Final = """You check whether a claim is supported by a premise.
Use only the premise and common unit conversions; no other outside knowledge.
Reply with one JSON object and nothing else:
{"verdict": "entailed" | "not_entailed" | "unknown", "reason": "<one sentence>"}
- entailed: the premise states or directly implies every part of the claim.
- not_entailed: the premise contradicts the claim, or lacks a figure, date, name or condition
  the claim asserts.
- unknown: you cannot decide.
The reason names the words or figures that decide it, quoting both texts where they differ."""


class OpenAICompatibleJudge:
    """An LLM grader behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Every grader failure (timeout, transport error, HTTP error, output that is not a JSON verdict,
    an unrecognised verdict word) becomes ``unknown`` with the failure as the reason; ``judge``
    does not raise for them. Pass ``client`` to reuse connections (the caller closes it);
    otherwise each call opens and closes its own.
    """

    name: str = "openai-compatible"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout_s: float = 10.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.version = f"{model};prompt-{PROMPT_VERSION}"
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._client = client

    def request_body(self, premise: str, hypothesis: str) -> dict[str, Any]:
        """The chat-completion request this judge sends."""
        return {
            "model": self.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": _SYSTEM_PROMPT},
                {"role": "user", "content": f"Premise:\n{premise}\n\nClaim:\n{hypothesis}"},
            ],
        }

    async def judge(self, premise: str, hypothesis: str) -> Judgement:
        outcome, reason = await self._ask(premise, hypothesis)
        return Judgement(outcome, reason, self.name, self.version)

    async def _ask(self, premise: str, hypothesis: str) -> tuple[Outcome, str]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body = self.request_body(premise, hypothesis)
        try:
            async with asyncio.timeout(self._timeout_s):
                if self._client is not None:
                    response = await self._post(self._client, body, headers)
                else:
                    async with httpx.AsyncClient() as client:
                        response = await self._post(client, body, headers)
        except (TimeoutError, httpx.TimeoutException):
            return "unknown", f"grader failed: no answer within {self._timeout_s:g} s"
        except (httpx.HTTPError, OSError) as exc:
            return "unknown", f"grader failed: {type(exc).__name__}: {exc}"
        if response.status_code != 200:
            snippet = response.text[:200].strip()
            return "unknown", f"grader failed: HTTP {response.status_code} from {self.url}: {snippet}"
        return _read_completion(response.content)

    async def _post(
        self, client: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str]
    ) -> httpx.Response:
        response = await client.post(
            self.url, json=body, headers=headers, timeout=self._timeout_s
        )
        await response.aread()
        return response


def _read_completion(raw: bytes) -> tuple[Outcome, str]:
    try:
        payload = json.loads(raw)
    except ValueError:
        return "unknown", f"grader failed: response is not JSON: {raw[:200]!r}"
    content = _completion_content(payload)
    if content is None:
        return "unknown", "grader failed: response has no choices[0].message.content string"
    verdict = _verdict_object(content)
    if verdict is None:
        return "unknown", f"grader failed: output is not a JSON verdict: {content[:200]!r}"
    word = verdict.get("verdict")
    normalised = re.sub(r"[\s-]+", "_", word.strip().lower()) if isinstance(word, str) else None
    if normalised not in OUTCOMES:
        return "unknown", f"grader failed: unrecognised verdict {word!r}"
    reason = verdict.get("reason")
    text = reason.strip() if isinstance(reason, str) and reason.strip() else "(grader gave no reason)"
    outcome: Outcome = (
        "entailed" if normalised == "entailed" else "not_entailed" if normalised == "not_entailed" else "unknown"
    )
    return outcome, text


def _completion_content(payload: object) -> str | None:
    if not isinstance(payload, dict):
        return None
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    return content if isinstance(content, str) else None


def _verdict_object(content: str) -> dict[str, Any] | None:
    """The first JSON object in the output; models often wrap it in prose or a code fence."""
    start = content.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(content, start)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
