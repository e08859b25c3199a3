"""Offline judge: text to tokens (words, numbers, dates, identifiers)."""

import re
from dataclasses import dataclass
from typing import Final

from lineage.claims.judges.vocabulary import (
    _APOSTROPHE,
    _CALENDAR_MONTHS,
    _CLAUSE_WORDS,
    _CURRENCIES,
    _DURATION_SECONDS,
    _FUNCTION_WORDS,
    _singular,
    _stem,
    _TokKind,
    _wordset,
)

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
# Words that cannot open a clause with a subject of its own: after 'and' they share the last one.
_SHARED_SUBJECT: Final = _wordset(
    "never not always also is are was were has have had can cannot must may will shall does did"
)
_PREPOSITIONS: Final = _wordset("for of in on at with from by to")


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
            clause += not (_inside_date(tokens, index) or _joins_one_statement(tokens, index))
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


def _joins_one_statement(tokens: list[_Tok], index: int) -> bool:
    """The 'and' in 'is stored in X and never leaves Y' (one subject, two verbs) or in 'parts
    and labour for two years' (two nouns before one phrase) does not start a clause; the one in
    'employees get 30 days and contractors get 14' does."""
    if tokens[index].norm != "and" or not 0 < index < len(tokens) - 1:
        return False
    before, after = tokens[index - 1], tokens[index + 1]
    if after.norm in _SHARED_SUBJECT:
        return True
    following = tokens[index + 2].norm if index + 2 < len(tokens) else "."
    return (
        _plain_word(before)
        and _plain_word(after)
        and (following in _PREPOSITIONS or following in (".", ";", "!", "?"))
    )


def _plain_word(tok: _Tok) -> bool:
    return tok.kind == "word" and tok.text.islower() and tok.norm not in _FUNCTION_WORDS


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
