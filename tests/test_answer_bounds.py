"""A model's output is parsed in linear time and bounded per field: one request cannot make the
service split, judge or record without limit."""

import re

import asyncpg
import httpx
import pytest

from lineage.claims import answers
from lineage.claims.answers import (
    MAX_ANSWER_CHARS,
    MAX_CITATIONS,
    MAX_CLAIM_CHARS,
    MAX_CLAIMS,
    parse_output,
    record_prompt,
)
from lineage.core.derive import derive
from lineage.core.errors import BadParameter
from lineage.store.postgres import PostgresStore


class WindowWatch:
    """Stands in for the abbreviation pattern and remembers the longest text it was shown."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.longest = 0

    def search(self, text: str) -> re.Match[str] | None:
        self.longest = max(self.longest, len(text))
        return self.pattern.search(text)


def test_the_abbreviation_check_looks_at_a_bounded_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # "A. " is an initial every time: the sentence never ends, and the old check re-read it all.
    watch = WindowWatch(answers._ABBREVIATION)
    monkeypatch.setattr(answers, "_ABBREVIATION", watch)
    spans = answers._sentences("A. " * 3000 + "Done.")
    assert len(spans) == 1
    assert 0 < watch.longest <= 16
    split = parse_output({"text": "Dr. Smith approved it [a]. It holds e.g. here. Yes!"}, [])
    assert [c.text for c in split.claims] == [
        "Dr. Smith approved it [a].",
        "It holds e.g. here.",
        "Yes!",
    ]


def test_many_citations_over_many_sentences_cite_the_right_ones() -> None:
    text = "".join(f"Fact {i}. " for i in range(500))
    citations = [{"context_id": f"c{i}", "index": text.index(f"Fact {i}.") + 3} for i in range(500)]
    split = parse_output({"text": text, "citations": citations}, [])
    assert [c.cited_ids for c in split.claims] == [[f"c{i}"] for i in range(500)]


@pytest.mark.parametrize(
    ("output", "rule"),
    [
        ({"text": "a. " * (MAX_ANSWER_CHARS // 3 + 1)}, "the answer text"),
        ({"text": "A. " * (MAX_CLAIM_CHARS // 3 + 1)}, "a claim"),
        ({"text": "b. " * (MAX_CLAIMS + 1)}, "claims (sentences)"),
        ({"claims": [{"text": "x"}] * (MAX_CLAIMS + 1)}, "claims"),
        ({"claims": [{"text": "x" * (MAX_CLAIM_CHARS + 1)}]}, "claims[0].text"),
        ({"text": "x.", "citations": [{"context_id": "a", "index": 0}] * (MAX_CITATIONS + 1)},
         "citations"),
    ],
)  # fmt: skip
def test_each_field_is_bounded(output: dict[str, object], rule: str) -> None:
    with pytest.raises(BadParameter, match=re.escape(rule)):
        parse_output(output, [])


async def test_an_oversized_answer_is_refused_and_nothing_is_written(
    store: PostgresStore, client: httpx.AsyncClient, owner: asyncpg.Connection
) -> None:
    doc = await derive(store, [], "Employees: 30 days.", "document", source_uri="s3://e")
    prompt = await record_prompt(store, [doc])
    before = await owner.fetchval("SELECT count(*) FROM provenance")
    refused = await client.post(
        "/v1/answers",
        json={"prompt_id": prompt.context_id, "output": {"text": "A. " * 16_000}},
    )
    assert refused.status_code == 422, refused.text
    assert "at most" in refused.json()["detail"]
    assert await owner.fetchval("SELECT count(*) FROM provenance") == before
