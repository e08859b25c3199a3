"""Claim judges: does the cited context (premise) entail a claim (hypothesis)?

A judge answers ``entailed``, ``not_entailed`` or ``unknown`` with a reason a person can check.

``OfflineJudge`` is rule based and conservative. It says ``entailed`` only when every figure,
date, name and content word of the claim is found in one clause of the premise and nothing in the
premise (a negation, a condition, a hedge, a superseded value, a second candidate value) could
undo the match. It says ``not_entailed`` only on concrete evidence: a figure, date, name,
identifier or negation of the claim that the premise lacks or states differently. Everything
else is ``unknown``.

``OpenAICompatibleJudge`` asks an LLM grader and turns every grader failure into ``unknown``.
``score_judge`` measures a judge against labelled pairs.
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
    "PROMPT_VERSION",
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
    contradiction or neutral pair. A ratio with a zero denominator is NaN.
    """
    counts: dict[str, dict[str, int]] = {label: dict.fromkeys(OUTCOMES, 0) for label in LABELS}
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
            "recall": _ratio(correct, support),
        }

    ent = counts["entailment"]
    scores = {
        "entailment": row(
            sum(ent.values()),
            ent["entailed"] + ent["not_entailed"],
            ent["entailed"],
            _ratio(ent["entailed"], entailed_answers),
        )
    }
    for label in ("contradiction", "neutral"):
        c = counts[label]
        scores[label] = row(
            sum(c.values()),
            c["entailed"] + c["not_entailed"],
            c["not_entailed"],
            negative_precision,
        )
    pooled = (counts["contradiction"], counts["neutral"])
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


def _words(text: str) -> list[str]:
    return text.split()


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_TokKind = Literal["iso", "num", "word", "punct"]
_ItemKind = Literal[
    "quantity", "label", "bare", "date", "weekday", "clock", "literal", "entity", "word"
]
_Bound = Literal["eq", "min", "max"]
_Status = Literal["active", "superseded", "endpoint"]
_Date = tuple[int | None, int | None, int | None]  # day, month, year

_APOSTROPHE: Final = "\u2019"
_EN_DASH: Final = "\u2013"
_PERMIT: Final = "=permission"
_OBLIGE: Final = "=obligation"
_MODAL_KEYS: Final = frozenset({_PERMIT, _OBLIGE})
# Small synonym groups; a claim word matches a premise word of the same group.
_WORD_CLASSES: Final[dict[str, str]] = {
    **dict.fromkeys(
        _wordset("can may able allow allows allowed permit permits permitted permission"), _PERMIT
    ),
    **dict.fromkeys(
        _wordset("must need needs needed require requires required mandatory obligatory obliged"),
        _OBLIGE,
    ),
    **dict.fromkeys(
        _wordset("get gets got getting receive receives received receiving entitled"), "=receive"
    ),
    **dict.fromkeys(_wordset("stay stays stayed remain remains remained"), "=remain"),
    **dict.fromkeys(_wordset("start starts started begin begins began"), "=begin"),
}

_STOPWORDS: Final = _wordset(
    """a an the is are was were be been being am has have had having do does did doing of in on
    at to for with by as into onto from that which who whom whose this these those there here it
    its they them their theirs he him his she her hers we us our ours you your yours i me my and
    or also will shall so such then now currently just very really both about per upon via what
    where how"""
)
_NEGATIONS: Final = _wordset(
    "not no never none nobody nothing neither nor without cannot hardly barely seldom rarely"
    " nowhere"
)
_PROHIBITIONS: Final = _wordset(
    "prohibited forbidden banned disallowed prohibit prohibits forbid forbids unable"
)
_NOT_REQUIRED: Final = _wordset("optional")
_HEDGES: Final = _wordset(
    """might could should would possibly perhaps maybe likely probably expected planned proposed
    draft intended estimated"""
)
_CONDITIONALS: Final = _wordset(
    "if unless except excluding provided providing whether assuming when whenever"
)
_RELATIONS: Final = _wordset(
    "before after since until till prior than between later earlier instead rather previously"
    " formerly"
)
_UNIVERSALS: Final = _wordset("any every all anyone everyone anybody everybody always")
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
    | _wordset("each some only more less fewer most least but")
)
_NEGATION_FILLERS: Final = _STOPWORDS | _wordset(
    "always ever yet even necessarily longer also all any"
)
_CLAUSE_WORDS: Final = _wordset("and but or while whereas although though however")

_UNIT_WORDS: Final[dict[str, int]] = {
    word: value
    for value, word in enumerate(
        _words(
            """zero one two three four five six seven eight nine ten eleven twelve thirteen
            fourteen fifteen sixteen seventeen eighteen nineteen"""
        )
    )
}
_TENS_WORDS: Final[dict[str, int]] = {
    word: 10 * (index + 2)
    for index, word in enumerate(_words("twenty thirty forty fifty sixty seventy eighty ninety"))
}
_NUMBER_WORDS: Final = frozenset(_UNIT_WORDS) | frozenset(_TENS_WORDS) | {"hundred"}
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
# Months and years are kept apart from days: a month is not a fixed number of days.
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
    "\u20ac": "EUR",
    "dollar": "USD",
    "usd": "USD",
    "$": "USD",
    "gbp": "GBP",
    "\u00a3": "GBP",
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
}
_BOUNDS: Final[tuple[tuple[tuple[str, ...], _Bound], ...]] = (
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
_APPROXIMATORS: Final = _wordset("about around roughly approximately nearly almost circa some ~")
_RANGE_WORDS: Final = frozenset({"to", "-", _EN_DASH})
_MONTHS: Final[dict[str, int]] = {
    **{
        name: number
        for number, name in enumerate(
            _words(
                """january february march april may june july august september october november
                december"""
            ),
            start=1,
        )
    },
    **{
        abbr: number
        for number, abbr in enumerate(_words("jan feb mar apr - jun jul aug sep oct nov dec"), 1)
        if abbr != "-"
    },
    "sept": 9,
}
_WEEKDAYS: Final = _wordset("monday tuesday wednesday thursday friday saturday sunday")
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
    elif w.endswith(("ed", "es")) and len(w) >= 5:
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


def _modal_of_contraction(norm: str) -> str | None:
    """The modal class a negated form carries: can't -> permission, mustn't -> obligation."""
    base = {"cannot": "can", "can't": "can", "won't": "will", "shan't": "shall"}.get(norm)
    if base is None:
        base = norm[:-3] if norm.endswith("n't") else norm
    key = _WORD_CLASSES.get(base)
    return key if key in _MODAL_KEYS else None


def _word_key(norm: str) -> str:
    if norm in _WORD_CLASSES:
        return _WORD_CLASSES[norm]
    if norm in _PROHIBITIONS:
        return _PERMIT
    if norm in _NOT_REQUIRED:
        return _OBLIGE
    if norm == "cannot" or norm.endswith("n't"):
        return _modal_of_contraction(norm) or norm
    return _stem(norm)


_CHANGE_STEMS: Final = frozenset(
    _stem(word)
    for word in _wordset(
        """moved changed rescheduled postponed switched shifted updated revised replaced reduced
        increased raised lowered extended shortened cut amended pushed delayed downgraded upgraded
        migrated converted renamed relocated adjusted brought"""
    )
)


# ---------------------------------------------------------------------------------------------
# Offline judge: tokens


_TOKEN_RE: Final = re.compile(
    r"(?P<iso>\d{4}-\d{2}-\d{2})(?![\w-])"
    r"|(?P<num>\d+(?:[.,:]\d+)*(?:st|nd|rd|th)?)"
    rf"|(?P<word>[^\W\d_]\w*(?:[-'{_APOSTROPHE}]\w+)*['{_APOSTROPHE}]?)"
    r"|(?P<punct>\S)"
)
_TOKEN_KINDS: Final[dict[str, _TokKind]] = {
    "iso": "iso",
    "num": "num",
    "word": "word",
    "punct": "punct",
}
_ORDINAL_RE: Final = re.compile(r"(?<=\d)(?:st|nd|rd|th)$")
_THOUSANDS_RE: Final = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_PLAIN_NUMBER_RE: Final = re.compile(r"^\d+(?:\.\d+)?$")
_CLOCK_RE: Final = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


@dataclass(slots=True)
class _Tok:
    text: str
    norm: str
    kind: _TokKind
    start: int
    end: int
    sentence: int = 0
    clause: int = 0
    initial: bool = False


def _normalise_word(text: str) -> str:
    norm = text.lower().replace(_APOSTROPHE, "'")
    if norm.endswith("'s"):
        return norm[:-2]
    return norm.rstrip("'")


def _tokenise(text: str) -> list[_Tok]:
    tokens: list[_Tok] = []
    for match in _TOKEN_RE.finditer(text):
        kind = _TOKEN_KINDS.get(match.lastgroup or "", "punct")
        raw, start = match.group(), match.start()
        if kind == "word" and "-" in raw and not any(ch.isdigit() for ch in raw):
            for part in re.finditer(r"[^-]+", raw):
                piece = part.group()
                tokens.append(
                    _Tok(
                        piece,
                        _normalise_word(piece),
                        "word",
                        start + part.start(),
                        start + part.end(),
                    )
                )
            continue
        norm = _normalise_word(raw) if kind == "word" else raw.lower()
        tokens.append(_Tok(raw, norm, kind, start, match.end()))

    sentence = clause = 0
    at_start = True
    previous_end = 0
    for index, tok in enumerate(tokens):
        if "\n\n" in text[previous_end : tok.start] and not at_start:
            sentence, clause, at_start = sentence + 1, clause + 1, True
        previous_end = tok.end
        tok.sentence, tok.clause = sentence, clause
        if at_start and tok.kind != "punct":
            tok.initial, at_start = True, False
        if tok.kind == "punct" and tok.norm in ".!?":
            sentence, clause, at_start = sentence + 1, clause + 1, True
        elif (tok.kind == "punct" and tok.norm in ",;:") or tok.norm in _CLAUSE_WORDS:
            clause += not _inside_date(tokens, index)
    return tokens


def _inside_date(tokens: list[_Tok], index: int) -> bool:
    """The comma in 'May 3, 2026' does not start a clause."""
    around = tokens[index - 1 : index + 2]
    return (
        len(around) == 3
        and tokens[index].norm == ","
        and around[0].kind == "num"
        and around[2].kind == "num"
        and len(around[2].norm) == 4
    )


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


def _unit_dimension(word: str) -> tuple[str, float]:
    """Comparison dimension of a unit word and its factor to that dimension's base unit."""
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


# ---------------------------------------------------------------------------------------------
# Offline judge: parsed items


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
class _Parsed:
    text: str
    tokens: list[_Tok]
    items: list[_Item] = field(default_factory=list)
    negations: list[_Negation] = field(default_factory=list)
    numbers: list[tuple[float, int]] = field(default_factory=list)

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


class _Parser:
    """Turns a text into items (figures, dates, names, words) and negations."""

    def __init__(self, text: str, *, premise: bool) -> None:
        self.parsed = _Parsed(text, _tokenise(text))
        self.tokens = self.parsed.tokens
        self.premise = premise
        self.consumed = [False] * len(self.tokens)

    def run(self) -> _Parsed:
        self._dates()
        self._weekdays_clocks_literals()
        self._phrases()
        i = 0
        while i < len(self.tokens):
            i = self._quantity_at(i) or i + 1
        self._entities()
        self._negations()
        self._words()
        self._numbers()
        return self.parsed

    def norm(self, index: int) -> str:
        return self.tokens[index].norm if 0 <= index < len(self.tokens) else ""

    def free(self, index: int) -> bool:
        return 0 <= index < len(self.tokens) and not self.consumed[index]

    def add(
        self,
        kind: _ItemKind,
        key: str,
        first: int,
        last: int,
        *,
        quantity: _Quantity | None = None,
        date: _Date = (None, None, None),
        words: tuple[str, ...] = (),
    ) -> None:
        surface = self.parsed.surface(first, last)
        clause = self.tokens[first].clause
        self.parsed.items.append(
            _Item(kind, key, surface, clause, first, last, quantity, date, words)
        )
        for index in range(first, last + 1):
            self.consumed[index] = True

    def _is_month(self, index: int) -> bool:
        tok = self.tokens[index]
        if tok.kind != "word" or not tok.text[:1].isupper() or tok.norm not in _MONTHS:
            return False
        if tok.norm != "may":
            return True
        beside_number = any(
            0 <= j < len(self.tokens) and self.tokens[j].kind == "num"
            for j in (index - 1, index + 1)
        )
        return not tok.initial or beside_number

    def _dates(self) -> None:
        for i, tok in enumerate(self.tokens):
            if tok.kind == "iso":
                y, m, d = (int(part) for part in tok.norm.split("-"))
                self.add("date", "date", i, i, date=(d, m, y))
        for i in range(len(self.tokens)):
            if self.consumed[i] or not self._is_month(i):
                continue
            day: int | None = None
            year: int | None = None
            first = last = i
            if self.free(i - 1) and (n := _small_int(self.tokens[i - 1], 1, 31)) is not None:
                day, first = n, i - 1
            elif (
                self.norm(i - 1) == "of"
                and self.free(i - 2)
                and (n := _small_int(self.tokens[i - 2], 1, 31)) is not None
            ):
                day, first = n, i - 2
            j = i + 1
            if (
                day is None
                and self.free(j)
                and (n := _small_int(self.tokens[j], 1, 31)) is not None
                and len(_ORDINAL_RE.sub("", self.tokens[j].norm)) <= 2
            ):
                day, last = n, j
                j += 2 if self.norm(j + 1) == "," else 1
            if self.free(j) and (n := _small_int(self.tokens[j], 1000, 2999)) is not None:
                year, last = n, j
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
                self._clock_or_literal(i, tok)

    def _clock_or_literal(self, i: int, tok: _Tok) -> None:
        clock = _CLOCK_RE.match(tok.norm)
        meridiem = self.norm(i + 1).replace(".", "")
        has_meridiem = meridiem in ("am", "pm")
        if clock:
            hour, minute = int(clock.group(1)), int(clock.group(2))
            if has_meridiem and hour <= 12:
                hour = hour % 12 + (12 if meridiem == "pm" else 0)
            self.add("clock", f"{hour:02d}:{minute:02d}", i, i + 1 if has_meridiem else i)
        elif has_meridiem and (whole := _small_int(tok, 1, 12)) is not None:
            hour = whole % 12 + (12 if meridiem == "pm" else 0)
            self.add("clock", f"{hour:02d}:00", i, i + 1)
        elif ":" in tok.norm or tok.norm.count(".") >= 2 or _parse_number(tok.norm) is None:
            self.add("literal", tok.norm, i, i)

    def _phrases(self) -> None:
        """Multiplier phrases: 'time and a half', 'double the', 'twice as', 'half the'."""
        factors = {"double": 2.0, "twice": 2.0, "triple": 3.0, "half": 0.5}
        for i in range(len(self.tokens)):
            if not self.free(i):
                continue
            words = tuple(self.norm(j) for j in range(i, i + 4))
            if words == ("time", "and", "a", "half"):
                self._add_times(i, i + 3, 1.5)
            elif words[0] in factors and words[1] in ("the", "as", "that"):
                self._add_times(i, i, factors[words[0]])

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
            parsed = _parse_number(tok.norm)
            if parsed is None:
                return None
            value, j = parsed, i + 1
        elif tok.norm in _UNIT_WORDS or tok.norm in _TENS_WORDS:
            value, j = 0.0, i
            while self.free(j) and self.norm(j) in _NUMBER_WORDS:
                word = self.norm(j)
                if word == "hundred":
                    value *= 100
                else:
                    value += _UNIT_WORDS.get(word, 0) + _TENS_WORDS.get(word, 0)
                j += 1
        else:
            return None
        if self.free(j) and self.norm(j) in _MULTIPLIERS:
            value *= _MULTIPLIERS[self.norm(j)]
            j += 1
        return value, j

    def _read_article_number(self, i: int) -> tuple[float, int] | None:
        """'a week', 'an hour': one of a time unit, except in 'once a week' and the like."""
        if not self.free(i) or self.norm(i) not in ("a", "an"):
            return None
        unit = _singular(self.norm(i + 1))
        if unit not in _DURATION_SECONDS and unit not in _CALENDAR_MONTHS:
            return None
        if self.norm(i - 1) in ("once", "twice", "thrice", "times", "time"):
            return None
        return 1.0, i + 1

    def _read_unit(self, j: int, currency: str | None) -> _Unit:
        if (
            self.norm(j) == "-"
            and self.tokens[j].kind == "punct"
            and self.free(j + 1)
            and self.tokens[j + 1].kind == "word"
        ):
            j += 1
        modifiers: list[str] = []
        while self.free(j) and self.norm(j) in _UNIT_MODIFIERS:
            modifiers.append(_UNIT_MODIFIERS[self.norm(j)])
            j += 1
        first = j
        if currency:
            unit = _Unit(f"currency:{currency}", 1.0, [], first, first - 1)
        elif self.norm(j) in ("%", "percent"):
            unit = _Unit("percent", 1.0, modifiers, first, j)
        elif self.norm(j) == "per" and self.norm(j + 1) == "cent":
            unit = _Unit("percent", 1.0, modifiers, first, j + 1)
        elif (
            self.free(j)
            and self.tokens[j].kind == "word"
            and self.norm(j) not in _FUNCTION_WORDS
            and not self.tokens[j].text[:1].isupper()
        ):
            dim, factor = _unit_dimension(self.norm(j))
            unit = _Unit(dim, factor, modifiers, first, j)
        else:
            return _Unit(None, 1.0, [], first, first - 1)
        return self._read_rate(unit)

    def _read_rate(self, unit: _Unit) -> _Unit:
        """'per minute', '/hour', 'a day': turn the quantity into a rate per base time unit."""
        k = unit.last + 1
        if self.norm(k) in ("per", "/"):
            k += 2 if self.norm(k + 1) in ("a", "an", "each", "every") else 1
        elif self.norm(k) in ("a", "an"):
            k += 1
        else:
            return unit
        per = _singular(self.norm(k))
        divisor = _DURATION_SECONDS.get(per) or _CALENDAR_MONTHS.get(per)
        if divisor and self.free(k):
            unit.dim = f"{unit.dim}/{'s' if per in _DURATION_SECONDS else 'month'}"
            unit.factor /= divisor
            unit.last = k
        return unit

    def _read_qualifiers(self, start: int, last: int) -> tuple[_Bound, bool, int, int]:
        """Bound ('at least', 'or more') and approximation ('about') around a quantity."""
        bound: _Bound = "eq"
        for phrase, kind in _BOUNDS:
            n = len(phrase)
            if all(
                self.norm(start - n + k) == word and self.free(start - n + k)
                for k, word in enumerate(phrase)
            ):
                bound, start = kind, start - n
                break
        approx = self.free(start - 1) and self.norm(start - 1) in _APPROXIMATORS
        if approx:
            start -= 1
        if self.norm(last + 1) == "or" and self.norm(last + 2) in ("more", "less", "fewer"):
            bound = "min" if self.norm(last + 2) == "more" else "max"
            last += 2
        return bound, approx, start, last

    def _quantity_at(self, i: int) -> int | None:
        """Parse a quantity starting at token i; the index after it, or None if there is none."""
        read = self._read_number(i) or self._read_article_number(i)
        if read is None:
            return None
        first_value, j = read
        first_end = j - 1
        second_value, second_end, from_to = first_value, -1, False
        if self.norm(j) in _RANGE_WORDS or (
            self.norm(j) == "and" and self.norm(i - 1) == "between"
        ):
            second = self._read_number(j + 1)
            if second is not None:
                second_value, j = second
                second_end = j - 1
                from_to = self.norm(i - 1) == "from"
        currency = _CURRENCIES.get(self.norm(i - 1)) if self.tokens[i - 1 : i] else None
        if currency and self.tokens[i - 1].kind != "punct":
            currency = None
        unit = self._read_unit(j, currency)
        if unit.dim is None and self.tokens[i].kind == "word":
            return None
        last = max(unit.last, j - 1)
        bound, approx, start, last = self._read_qualifiers(i - 1 if currency else i, last)
        dim = unit.dim
        kind: _ItemKind = "quantity"
        if dim is None:
            label = i - 1
            kind = "bare"
            if (
                bound == "eq"
                and not approx
                and self.free(label)
                and self.tokens[label].kind == "word"
                and self.norm(label) not in _FUNCTION_WORDS
            ):
                dim, kind = f"label:{_stem(self.norm(label))}", "label"
        parts = (
            self.parsed.surface(i, first_end),
            self.parsed.surface(first_end + 2, second_end) if second_end >= 0 else "",
            self.parsed.surface(unit.first, unit.last) if unit.last >= unit.first else "",
        )
        values = (first_value * unit.factor, second_value * unit.factor)
        modifiers = frozenset(unit.modifiers)
        quantity = _Quantity(values, bound, approx, modifiers, from_to, parts)
        self.add(kind, dim or "bare", start, last, quantity=quantity)
        if from_to:
            self.consumed[i - 1] = True
        return last + 1

    def _entities(self) -> None:
        i = 0
        while i < len(self.tokens):
            if not self._capitalised(i):
                i += 1
                continue
            j = i
            while (
                self._capitalised(j + 1) and self.tokens[j + 1].sentence == self.tokens[i].sentence
            ):
                j += 1
            tok = self.tokens[i]
            acronym = len(tok.text) >= 2 and tok.text.isupper()
            camel = any(ch.isupper() for ch in tok.text[1:])
            # A lone capitalised first word is usually an ordinary word, not a name.
            if not tok.initial or j > i or acronym or camel:
                words = tuple(t.norm for t in self.tokens[i : j + 1])
                self.add("entity", " ".join(words), i, j, words=words)
            i = j + 1

    def _capitalised(self, index: int) -> bool:
        if not self.free(index):
            return False
        tok = self.tokens[index]
        return tok.kind == "word" and tok.text[:1].isupper() and tok.norm not in _FUNCTION_WORDS

    def _negations(self) -> None:
        for i, tok in enumerate(self.tokens):
            norm = tok.norm
            if tok.kind != "word":
                continue
            if norm in ("no", "not") and (
                self.norm(i + 1) == "only"
                or (
                    self.norm(i + 1) in ("more", "less", "fewer", "later", "earlier", "longer")
                    and self.norm(i + 2) == "than"
                )
            ):
                continue
            if norm in _PROHIBITIONS or norm in _NOT_REQUIRED:
                modal = _PERMIT if norm in _PROHIBITIONS else _OBLIGE
                self.parsed.negations.append(_Negation(tok.text, frozenset({modal}), modal, i, i))
            elif norm == "cannot" or norm.endswith("n't") or norm in _NEGATIONS:
                self._negation_at(i, _modal_of_contraction(norm))

    def _negation_at(self, i: int, modal: str | None) -> None:
        first = i
        before = _WORD_CLASSES.get(self.norm(i - 1))
        if modal is None and before in _MODAL_KEYS:
            modal, first = before, i - 1
        heads: list[str] = []
        last = i
        for k in range(i + 1, min(i + 6, len(self.tokens))):
            nxt = self.tokens[k]
            if nxt.kind != "word" or nxt.clause != self.tokens[i].clause:
                break
            if not heads and nxt.norm in _NEGATION_FILLERS:
                continue
            if nxt.norm in _FUNCTION_WORDS and nxt.norm not in _WORD_CLASSES:
                break
            heads.append(_word_key(nxt.norm))
            last = k
            if len(heads) == 2:
                break
        surface = self.parsed.surface(first, last)
        self.parsed.negations.append(_Negation(surface, frozenset(heads), modal, first, last))

    def _words(self) -> None:
        for i, tok in enumerate(self.tokens):
            norm = tok.norm
            if tok.kind != "word" or norm in _STOPWORDS:
                continue
            # The claim's figures and names are checked as items; the premise keeps every word.
            if self.consumed[i] and not self.premise:
                continue
            if norm == "cannot" or norm.endswith("n't"):
                modal = _modal_of_contraction(norm)
                if modal is None:
                    continue
                key = modal
            elif norm in _NEGATIONS:
                continue
            else:
                key = _word_key(norm)
            self.parsed.items.append(_Item("word", key, tok.text, tok.clause, i, i))

    def _numbers(self) -> None:
        """Every number the text writes, for claims that give a bare number."""
        for item in self.parsed.items:
            for part in item.date:
                if part is not None:
                    self.parsed.numbers.append((float(part), item.clause))
        for tok in self.tokens:
            if tok.kind == "num" and (value := _parse_number(tok.norm)) is not None:
                self.parsed.numbers.append((value, tok.clause))
            elif tok.kind == "word" and tok.norm in _UNIT_WORDS:
                self.parsed.numbers.append((float(_UNIT_WORDS[tok.norm]), tok.clause))


def _parse(text: str, *, premise: bool) -> _Parsed:
    parsed = _Parser(text, premise=premise).run()
    if premise:
        _mark_changed_quantities(parsed)
        _mark_from_to(parsed)
        _mark_superseders(parsed)
    return parsed


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


# ---------------------------------------------------------------------------------------------
# Offline judge: comparison


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

    def match(self, hyp: _Item, found: list[_Item], *, name_like: bool = False) -> None:
        self.clause_sets.append({item.clause for item in found})
        for item in found:
            self.matched_tokens.update(range(item.first, item.last + 1))
        if name_like:
            self.placements.append((hyp.first, found[0].first, hyp.surface))
        shown = found[0].surface
        if hyp.kind != "word":
            same = hyp.surface.lower() == shown.lower()
            self.evidence.append(f"'{hyp.surface}'" if same else f"'{hyp.surface}' = '{shown}'")
        elif hyp.key.startswith("=") and _stem(hyp.surface.lower()) != _stem(shown.lower()):
            self.evidence.append(f"'{hyp.surface}' ~ '{shown}'")
        else:
            self.words.append(hyp.surface)


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
    aligned: set[int] = set()
    for neg in h.negations:
        partners = {i for i, pn in enumerate(p.negations) if pn.keys & neg.keys}
        aligned |= partners
        if partners:
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


def _judge_offline(premise: str, hypothesis: str) -> tuple[Outcome, str]:
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
    _check_negations(v, h, p)
    _check_only(v, h, p)
    if v.conflicts:
        return "not_entailed", "; ".join(dict.fromkeys(v.conflicts))

    if v.uncovered:
        v.blockers.insert(0, f"the premise does not mention {_quoted(v.uncovered)}")
    _check_premise_hazards(v, h, p)
    _check_roles(v, h, p)
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
    'double' = 2 times, and a few synonym groups (need/require, get/receive, can/may/permitted).
    Paraphrases beyond that come back ``unknown``. Known blind spot: the order of two ordinary
    nouns is not checked, so a swap such as 'the cat chased the dog' / 'the dog chased the cat'
    is not caught; swaps of names and identifiers are.
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
    does not raise for them. ``timeout_s`` bounds the whole call. Pass ``client`` to reuse
    connections (the caller closes it); otherwise each call opens and closes its own.
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
        if not response.is_success:
            snippet = response.text[:200].strip()
            return (
                "unknown",
                f"grader failed: HTTP {response.status_code} from {self.url}: {snippet}",
            )
        return _read_completion(response.content)

    async def _post(
        self, client: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str]
    ) -> httpx.Response:
        return await client.post(self.url, json=body, headers=headers, timeout=self._timeout_s)


def _read_completion(raw: bytes) -> tuple[Outcome, str]:
    try:
        payload = json.loads(raw)
    except ValueError:
        return "unknown", f"grader failed: response is not JSON: {raw[:200]!r}"
    content = _completion_content(payload)
    if content is None:
        return "unknown", "grader failed: response has no choices[0].message.content string"
    verdict = _first_json_object(content)
    if verdict is None:
        return "unknown", f"grader failed: output is not a JSON verdict: {content[:200]!r}"
    word = verdict.get("verdict")
    normalised = re.sub(r"[\s-]+", "_", word.strip().lower()) if isinstance(word, str) else ""
    reason = verdict.get("reason")
    text = reason.strip() if isinstance(reason, str) and reason.strip() else "(no reason given)"
    if normalised == "entailed":
        return "entailed", text
    if normalised == "not_entailed":
        return "not_entailed", text
    if normalised == "unknown":
        return "unknown", text
    return "unknown", f"grader failed: unrecognised verdict {word!r}"


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


def _first_json_object(content: str) -> dict[str, Any] | None:
    """The first JSON object in the output; models often wrap it in prose or a code fence."""
    start = content.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(content, start)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
