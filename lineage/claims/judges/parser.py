"""Offline judge: tokens to parsed items."""

from lineage.claims.judges.items import _Item, _Negation, _Parsed, _Quantity, _Unit
from lineage.claims.judges.references import read_references
from lineage.claims.judges.supersession import (
    _mark_changed_quantities,
    _mark_from_to,
    _mark_superseders,
)
from lineage.claims.judges.tokens import (
    _CLOCK_RE,
    _ORDINAL_RE,
    _parse_number,
    _small_int,
    _Tok,
    _tokenise,
    _unit_dimension,
)
from lineage.claims.judges.vocabulary import (
    _APPROXIMATORS,
    _BOUNDS,
    _CALENDAR_MONTHS,
    _CURRENCIES,
    _DURATION_SECONDS,
    _FUNCTION_WORDS,
    _MODAL_KEYS,
    _MONTHS,
    _MULTIPLIERS,
    _NEGATION_FILLERS,
    _NEGATIONS,
    _NOT_REQUIRED,
    _NUMBER_WORDS,
    _OBLIGE,
    _PERMIT,
    _PROHIBITIONS,
    _RANGE_WORDS,
    _STOPWORDS,
    _TENS_WORDS,
    _UNIT_MODIFIERS,
    _UNIT_WORDS,
    _WEEKDAYS,
    _WORD_CLASSES,
    _Bound,
    _Date,
    _ItemKind,
    _modal_of_contraction,
    _singular,
    _stem,
    _word_key,
)


class _Parser:
    """Turns a text into items (figures, dates, names, words) and negations."""

    def __init__(self, text: str, *, premise: bool) -> None:
        self.parsed = _Parsed(text, _tokenise(text))
        self.tokens = self.parsed.tokens
        self.premise = premise
        self.consumed = [False] * len(self.tokens)

    def run(self) -> _Parsed:
        self._references()
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

    def _references(self) -> None:
        """Cited clauses and documents, deferral words included, are read as one item each."""
        for reference in read_references(self.parsed):
            self.parsed.references.append(reference)
            for index in range(reference.first, reference.last + 1):
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
