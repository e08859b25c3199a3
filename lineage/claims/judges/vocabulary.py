"""Offline judge: the words it knows (synonyms, number words, units, stems)."""

from typing import Final, Literal


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
