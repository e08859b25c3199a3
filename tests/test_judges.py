"""Claim judges: the offline rules on the labelled pairs and on targeted cases, the scoring
helper, and the LLM grader against a real HTTP server on 127.0.0.1."""

import json
import math
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from lineage.claims.judges import (
    Judge,
    Judgement,
    OfflineJudge,
    OpenAICompatibleJudge,
    format_scores,
    score_judge,
)

PAIRS = Path(__file__).resolve().parent / "data" / "claims" / "pairs.jsonl"


def read_pairs() -> list[dict[str, str]]:
    if not PAIRS.is_file():
        return []
    return [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]


def load_pairs() -> list[dict[str, str]]:
    pairs = read_pairs()
    if not pairs:
        pytest.fail(
            f"labelled claim pairs missing or empty: {PAIRS} "
            "(tests/data/claims/pairs.jsonl is part of the repository)"
        )
    return pairs


OFFLINE = OfflineJudge()


# ---------------------------------------------------------------------------------------------
# Labelled pairs


def pair_params() -> list[Any]:
    """One case per labelled pair; with none, one case that fails (never zero cases)."""
    pairs = read_pairs()
    if not pairs:
        return [pytest.param(None, id="pairs-missing")]
    return [pytest.param(pair, id=pair["id"]) for pair in pairs]


@pytest.mark.parametrize("pair", pair_params())
async def test_offline_judge_never_entails_a_pair_that_is_not_entailment(
    pair: dict[str, str] | None,
) -> None:
    if pair is None:
        load_pairs()
        return
    judgement = await OFFLINE.judge(pair["premise"], pair["hypothesis"])
    assert judgement.reason
    if pair["label"] != "entailment":
        assert judgement.outcome != "entailed", (
            f"{pair['id']}: entailed a {pair['label']} pair: {pair['hypothesis']!r} "
            f"from {pair['premise']!r}: {judgement.reason}"
        )


async def test_offline_judge_scores_on_labelled_pairs() -> None:
    pairs = load_pairs()
    results: list[tuple[str, str]] = []
    violations: list[str] = []
    for pair in pairs:
        judgement = await OFFLINE.judge(pair["premise"], pair["hypothesis"])
        results.append((pair["label"], judgement.outcome))
        if pair["label"] == "contradiction" and judgement.outcome == "entailed":
            violations.append(f"{pair['id']} ({judgement.reason})")
    scores = score_judge(results)  # the figures themselves: python -m bench.judge

    assert not violations, f"entailed on contradiction pairs: {', '.join(violations)}"
    assert scores["entailment"]["support"] + scores["not_entailment"]["support"] == len(pairs)
    for label, row in scores.items():
        assert 0.0 <= row["recall"] <= 1.0, label
        assert math.isnan(row["precision"]) or 0.0 <= row["precision"] <= 1.0, label
        assert row["answered"] <= row["support"], label
    assert scores["contradiction"]["wrong"] == 0.0


# ---------------------------------------------------------------------------------------------
# Targeted offline cases


def offline(premise: str, claim: str) -> Judgement:
    return OFFLINE.judge_sync(premise, claim)


def test_number_mismatch_names_both_figures() -> None:
    j = offline(
        "Contractors receive 14 days' written notice before termination.",
        "Contractors are entitled to 30 days' notice.",
    )
    assert j.outcome == "not_entailed"
    assert "'30 days'" in j.reason
    assert "'14 days'" in j.reason


def test_scaled_and_rate_figures_are_compared_after_conversion() -> None:
    budget = offline(
        "The board approved the budget of 4.2 million euros.",
        "The approved budget was 42 million euros.",
    )
    assert budget.outcome == "not_entailed"
    assert "'42 million euros'" in budget.reason
    assert "'4.2 million euros'" in budget.reason
    rate = offline(
        "The API rate limit is 600 requests per minute per key.",
        "Each key may send 6,000 requests per minute.",
    )
    assert rate.outcome == "not_entailed"
    assert "'6,000 requests per minute'" in rate.reason
    same_rate = offline(
        "The limit is 600 requests per minute.", "The limit is 10 requests per second."
    )
    assert same_rate.outcome == "entailed", same_rate.reason


def test_month_mismatch() -> None:
    j = offline(
        "Invoice 42 was approved by Maria Chen on 3 March 2026.",
        "Invoice 42 was approved in April 2026.",
    )
    assert j.outcome == "not_entailed"
    assert "'April 2026'" in j.reason
    assert "'3 March 2026'" in j.reason


def test_matching_month_is_entailed() -> None:
    j = offline(
        "Invoice 42 was approved by Maria Chen on 3 March 2026.",
        "Invoice 42 was approved in March 2026.",
    )
    assert j.outcome == "entailed", j.reason
    assert "'March 2026'" in j.reason


def test_named_entity_missing_from_premise() -> None:
    j = offline(
        "Invoice 42 was approved by Maria Chen on 3 March 2026.",
        "David Park approved invoice 42.",
    )
    assert j.outcome == "not_entailed"
    assert "'David Park'" in j.reason
    assert "'Maria Chen'" in j.reason


def test_passive_voice_with_the_same_name_is_entailed() -> None:
    j = offline(
        "Invoice 42 was approved by Maria Chen on 3 March 2026.",
        "Maria Chen approved invoice 42.",
    )
    assert j.outcome == "entailed", j.reason


def test_swapped_names_are_not_entailed() -> None:
    j = offline("Alice reports to Bob.", "Bob reports to Alice.")
    assert j.outcome == "unknown"
    assert "swap" in j.reason


def test_negation_in_premise_only() -> None:
    j = offline(
        "Remote work is not permitted for staff in their first 90 days.",
        "Remote work is permitted for staff in their first 90 days.",
    )
    assert j.outcome == "not_entailed"
    assert "'not permitted'" in j.reason


def test_negation_in_claim_only() -> None:
    j = offline("Contractors receive 14 days' notice.", "Contractors do not receive notice.")
    assert j.outcome == "not_entailed"
    assert "not receive" in j.reason


def test_negation_on_both_sides_is_entailed() -> None:
    j = offline(
        "Remote work is not permitted for staff in their first 90 days.",
        "Staff in their first 90 days cannot work remotely.",
    )
    assert j.outcome == "entailed", j.reason


def test_two_weeks_is_fourteen_days() -> None:
    j = offline(
        "Contractors receive 14 days' written notice before termination.",
        "Contractors get two weeks' notice.",
    )
    assert j.outcome == "entailed", j.reason
    assert "'two weeks' = '14 days'" in j.reason


def test_number_words_and_years_in_months() -> None:
    assert offline("Deploys need two approvals.", "Deploys need 2 approvals.").outcome == (
        "entailed"
    )
    j = offline(
        "The warranty covers parts for two years.", "The warranty covers parts for 36 months."
    )
    assert j.outcome == "not_entailed"
    assert "'36 months'" in j.reason
    assert "'two years'" in j.reason


def test_only_restriction_against_any() -> None:
    j = offline("Only administrators can delete a workspace.", "Any member can delete a workspace.")
    assert j.outcome == "not_entailed"
    assert "'Only administrators'" in j.reason


def test_superseded_value() -> None:
    premise = "The meeting moved from Tuesday to Thursday at 10:00."
    old = offline(premise, "The meeting is on Tuesday at 10:00.")
    assert old.outcome == "not_entailed"
    assert "'Tuesday'" in old.reason
    assert "'Thursday'" in old.reason
    assert offline(premise, "The meeting is on Thursday at 10:00.").outcome == "entailed"


def test_lower_bound() -> None:
    premise = "Passwords must be at least 12 characters long."
    short = offline(premise, "An 8-character password meets the policy.")
    assert short.outcome == "not_entailed"
    assert "'at least 12 characters'" in short.reason
    assert offline(premise, "A 16-character password meets the policy.").outcome == "unknown"


def test_a_negated_word_reads_as_its_contrary() -> None:
    never = offline("The data never leaves the EU.", "The data stays in the EU.")
    assert never.outcome == "entailed", never.reason
    assert "'stays' ~ 'never leaves'" in never.reason
    stays = offline("The data stays in the EU.", "The data does not leave the EU.")
    assert stays.outcome == "entailed", stays.reason
    assert offline("The data never leaves the EU.", "The data leaves the EU.").outcome == (
        "not_entailed"
    )
    # not large is not small: only contraries without a middle ground are read
    assert offline("The room is not large.", "The room is small.").outcome == "unknown"


def test_lasts_reads_a_closing_duration_introduced_by_for() -> None:
    j = offline("The warranty covers parts for two years.", "The warranty lasts 24 months.")
    assert j.outcome == "entailed", j.reason
    assert "'lasts' ~ 'for two years'" in j.reason
    longer = offline("The warranty covers parts for two years.", "The warranty lasts 36 months.")
    assert longer.outcome == "not_entailed"
    of = offline("The company was fined for two years of violations.", "The fine lasts two years.")
    assert of.outcome == "unknown", of.reason


def test_and_before_a_verb_or_a_shared_phrase_keeps_one_statement() -> None:
    shared_subject = offline(
        "The data is encrypted and never leaves the EU.", "The data stays in the EU."
    )
    assert shared_subject.outcome == "entailed", shared_subject.reason
    shared_phrase = offline(
        "The warranty covers parts and labour for two years.", "The warranty lasts two years."
    )
    assert shared_phrase.outcome == "entailed", shared_phrase.reason
    for premise, claim in [
        (
            "Employees are paid monthly and contractors are paid weekly.",
            "Contractors are paid monthly.",
        ),
        ("Employees get 30 days' notice and contractors for 14 days.", "Contractors get 30 days."),
    ]:
        j = offline(premise, claim)
        assert j.outcome != "entailed", (premise, claim, j.reason)


def test_unsure_cases_are_unknown_with_a_reason() -> None:
    cases = [
        ("Refunds are given if the item is unused.", "Refunds are given."),
        ("Staff may work remotely.", "Staff work remotely."),
        ("Employees get 30 days' notice and contractors get 14 days.", "Contractors get 30 days."),
        ("Shops are open from Monday to Friday.", "Shops are open on Monday."),
        ("The warranty covers parts and labour.", "The warranty covers accidental damage."),
    ]
    for premise, claim in cases:
        j = offline(premise, claim)
        assert j.outcome == "unknown", (premise, claim, j.reason)
        assert j.reason.startswith("not sure: ")


def test_degenerate_inputs_are_unknown() -> None:
    assert offline("", "The refund window is 45 days.").outcome == "unknown"
    assert offline("The refund window is 45 days.", "").outcome == "unknown"
    assert offline("The refund window is 45 days.", "...").outcome == "unknown"


async def test_offline_judge_is_a_judge() -> None:
    judge: Judge = OFFLINE
    j = await judge.judge("The chunker splits at 512 tokens.", "The chunker splits at 512 tokens.")
    assert j == Judgement("entailed", j.reason, "offline", OFFLINE.version)


# ---------------------------------------------------------------------------------------------
# Scoring


def test_score_judge_mapping() -> None:
    scores = score_judge(
        [
            ("entailment", "entailed"),
            ("entailment", "unknown"),
            ("entailment", "not_entailed"),
            ("contradiction", "not_entailed"),
            ("contradiction", "entailed"),
            ("neutral", "not_entailed"),
            ("neutral", "unknown"),
        ]
    )
    assert scores["entailment"]["precision"] == pytest.approx(1 / 2)
    assert scores["entailment"]["recall"] == pytest.approx(1 / 3)
    assert scores["contradiction"]["recall"] == pytest.approx(1 / 2)
    assert scores["contradiction"]["wrong"] == 1.0
    assert scores["neutral"]["recall"] == pytest.approx(1 / 2)
    assert scores["not_entailment"]["precision"] == pytest.approx(2 / 3)
    assert scores["not_entailment"]["recall"] == pytest.approx(2 / 4)
    assert math.isnan(score_judge([])["entailment"]["precision"])
    table = format_scores(scores).splitlines()
    assert [line.split()[0] for line in table[2:]] == [
        "entailment",
        "contradiction",
        "neutral",
        "not_entailment",
    ]
    assert table[2].split()[-2:] == ["0.50", "0.33"]
    assert "n/a" in format_scores(score_judge([]))
    with pytest.raises(ValueError, match="gold label"):
        score_judge([("entails", "entailed")])
    with pytest.raises(ValueError, match="outcome"):
        score_judge([("entailment", "yes")])


# ---------------------------------------------------------------------------------------------
# LLM grader against a local server


@dataclass
class FakeGraderState:
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


class FakeGraderServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the handler threads

    def __init__(self, state: FakeGraderState) -> None:
        super().__init__(("127.0.0.1", 0), FakeGraderHandler)
        self.state = state


def completion(content: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
        }
    ).encode()


# The model name in the request picks the answer.
ANSWERS: dict[str, tuple[int, bytes]] = {
    "says-entailed": (
        200,
        completion('{"verdict": "entailed", "reason": "both say 14 days"}'),
    ),
    "says-not-entailed": (
        200,
        completion('```json\n{"verdict": "not_entailed", "reason": "30 days vs 14 days"}\n```'),
    ),
    "says-malformed": (200, completion("I think the claim holds.")),
    "says-truncated": (200, completion('{"verdict": "entailed", "reason": "both say')),
    "says-contradiction": (
        200,
        completion('{"verdict": "contradiction", "reason": "30 vs 14"}'),
    ),
    "body-not-json": (200, b"<html>gateway</html>"),
    "http-500": (500, b'{"error": {"message": "model crashed"}}'),
}


class FakeGraderHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        assert isinstance(self.server, FakeGraderServer)
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        self.server.state.requests.append(
            {"path": self.path, "authorization": self.headers.get("Authorization"), "body": body}
        )
        model = body.get("model")
        if model == "slow":
            self.server.state.release.wait(timeout=5)
            status, payload = ANSWERS["says-entailed"]
        else:
            status, payload = ANSWERS[model]
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            pass  # the client gave up first (the timeout case)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def grader() -> Iterator[tuple[str, FakeGraderState]]:
    state = FakeGraderState()
    server = FakeGraderServer(state)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host!s}:{port}/v1", state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


PREMISE = "Contractors receive 14 days' written notice before termination."
CLAIM = "Contractors are entitled to 30 days' notice."


async def test_grader_entailed(grader: tuple[str, FakeGraderState]) -> None:
    base_url, state = grader
    judge = OpenAICompatibleJudge(base_url + "/", "says-entailed", "test-key", timeout_s=5)
    j = await judge.judge(PREMISE, CLAIM)
    assert j == Judgement("entailed", "both say 14 days", "openai-compatible", judge.version)
    assert "says-entailed" in j.judge_version
    [request] = state.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["authorization"] == "Bearer test-key"
    body = request["body"]
    assert body["model"] == "says-entailed"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert PREMISE in body["messages"][1]["content"]
    assert CLAIM in body["messages"][1]["content"]


async def test_grader_not_entailed_in_a_code_fence(grader: tuple[str, FakeGraderState]) -> None:
    base_url, state = grader
    async with httpx.AsyncClient() as client:
        judge = OpenAICompatibleJudge(base_url, "says-not-entailed", None, client=client)
        j = await judge.judge(PREMISE, CLAIM)
    assert (j.outcome, j.reason) == ("not_entailed", "30 days vs 14 days")
    assert state.requests[0]["authorization"] is None


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("says-malformed", "not a JSON verdict"),
        ("says-truncated", "not a JSON verdict"),
        ("says-contradiction", "unrecognised verdict 'contradiction'"),
        ("body-not-json", "not JSON"),
        ("http-500", "HTTP 500"),
    ],
)
async def test_grader_failures_are_unknown(
    grader: tuple[str, FakeGraderState], model: str, expected: str
) -> None:
    base_url, _ = grader
    j = await OpenAICompatibleJudge(base_url, model, "k", timeout_s=5).judge(PREMISE, CLAIM)
    assert j.outcome == "unknown"
    assert j.reason.startswith("grader failed: ")
    assert expected in j.reason


async def test_grader_timeout_is_unknown(grader: tuple[str, FakeGraderState]) -> None:
    base_url, _ = grader
    j = await OpenAICompatibleJudge(base_url, "slow", "k", timeout_s=0.3).judge(PREMISE, CLAIM)
    assert j.outcome == "unknown"
    assert "no answer within 0.3 s" in j.reason


async def test_grader_unreachable_is_unknown() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    judge = OpenAICompatibleJudge(f"http://127.0.0.1:{port}/v1", "any", None, timeout_s=5)
    j = await judge.judge(PREMISE, CLAIM)
    assert j.outcome == "unknown"
    assert j.reason.startswith("grader failed: ")
