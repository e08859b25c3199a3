"""The offline judge on probes written for this project (tests/data/claims/probes.jsonl): claims
that drop or change a qualifier, number, date, negation or role, cross-references, and plain
paraphrases; and the `lineage.judges` entry point that plugs in an operator's judge."""

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.judge import PAIRS, read_cases, report, split_by_premise
from lineage.claims.judges import (
    ENTRY_POINT_GROUP,
    OfflineJudge,
    OpenAICompatibleJudge,
    judge_from_settings,
)
from lineage.claims.judges.scoring import format_scores, score_judge
from lineage.core.errors import BadParameter
from lineage.settings import Settings

PROBES = Path(__file__).parent / "data" / "claims" / "probes.jsonl"
KINDS = ("qualifier", "date", "number", "negation", "role", "cross_reference", "paraphrase")
OFFLINE = OfflineJudge()


def read_probes() -> list[dict[str, str]]:
    probes = [json.loads(line) for line in PROBES.read_text().splitlines() if line.strip()]
    assert {p["kind"] for p in probes} == set(KINDS), PROBES
    return probes


@pytest.mark.parametrize("probe", read_probes(), ids=lambda probe: probe["id"])
def test_no_false_entailed_on_a_probe(probe: dict[str, str]) -> None:
    judgement = OFFLINE.judge_sync(probe["premise"], probe["hypothesis"])
    if probe["label"] != "entailment":
        assert judgement.outcome != "entailed", (
            f"{probe['id']} ({probe['kind']}): entailed {probe['hypothesis']!r} "
            f"from {probe['premise']!r}: {judgement.reason}"
        )
    if probe["label"] == "contradiction" and probe["kind"] in ("number", "negation"):
        assert judgement.outcome == "not_entailed", judgement.reason


def test_plain_paraphrases_stay_entailed() -> None:
    """The caution against false "entailed" must not cost the paraphrases the judge reads."""
    results = [
        (p["label"], OFFLINE.judge_sync(p["premise"], p["hypothesis"]).outcome)
        for p in read_probes()
    ]
    scores = score_judge(results)
    assert scores["entailment"]["precision"] == 1.0, format_scores(scores)
    assert scores["entailment"]["recall"] >= 0.8, format_scores(scores)


def test_limits_the_claim_drops_are_named() -> None:
    dropped = OFFLINE.judge_sync(
        "Shipping is free for orders above 50 dollars.", "Shipping is free."
    )
    assert dropped.outcome == "unknown"
    assert "for orders" in dropped.reason and "which the claim drops" in dropped.reason
    dated = OFFLINE.judge_sync(
        "The library was closed for repairs in 2020.", "The library is closed for repairs."
    )
    assert dated.outcome == "unknown" and "the premise dates it ('in 2020')" in dated.reason
    past = OFFLINE.judge_sync(
        "Invoice 42 was approved by Maria Chen on 3 March 2026.", "Maria Chen approved invoice 42."
    )
    assert past.outcome == "entailed", past.reason
    swapped = OFFLINE.judge_sync(
        "The landlord pays the tenant's moving costs.",
        "The tenant pays the landlord's moving costs.",
    )
    assert swapped.outcome == "unknown" and "swap the roles" in swapped.reason


def test_a_cross_reference_lends_terms_only_as_stated() -> None:
    merged = OFFLINE.judge_sync(
        "Employees: 30 days' notice.\n\nContractor notice follows the employee policy.",
        "Contractors are entitled to 30 days' notice, the same as employees.",
    )
    assert merged.outcome == "entailed", merged.reason
    assert "cross-reference" in merged.reason
    alone = OFFLINE.judge_sync(
        "Employees: 30 days' notice.", "Contractors are entitled to 30 days' notice."
    )
    assert alone.outcome != "entailed"


def test_a_clause_of_another_document_is_not_read_into_the_premise() -> None:
    premise = "Termination notice is 30 days, as defined in Section 4 of the Master Agreement."
    deferred = OFFLINE.judge_sync(premise, "Termination notice is 30 days.")
    assert deferred.outcome == "unknown", deferred.reason
    assert "'Section 4 of the Master Agreement'" in deferred.reason
    lent = OFFLINE.judge_sync(
        "Employees: 30 days' notice, as defined in Section 4 of the Master Agreement.\n\n"
        "Contractor notice follows the employee policy.",
        "Contractors receive 30 days' notice.",
    )
    assert lent.outcome == "unknown", lent.reason
    assert "'Section 4 of the Master Agreement'" in lent.reason
    cited = OFFLINE.judge_sync(
        premise, "Under Section 4 of the Master Agreement, termination notice is 30 days."
    )
    assert cited.outcome == "entailed", cited.reason
    elsewhere = OFFLINE.judge_sync(
        "Termination notice is 30 days. Late fees are as defined in Section 9 of the Master "
        "Agreement.",
        "Termination notice is 30 days.",
    )
    assert elsewhere.outcome == "entailed", elsewhere.reason


def test_the_judge_bench_holds_out_whole_premises_and_finds_no_false_entailed() -> None:
    pairs = read_cases(PAIRS)
    tuning, held_out = split_by_premise(pairs)
    assert sorted(p["id"] for p in tuning + held_out) == sorted(p["id"] for p in pairs)
    assert not {p["premise"] for p in tuning} & {p["premise"] for p in held_out}
    for half in (tuning, held_out):
        assert {p["label"] for p in half} == {"entailment", "contradiction", "neutral"}
    text = report(None, "python -m bench.judge")
    assert "## Held-out half of the labelled pairs" in text
    assert "False `entailed` (now): none." in text


# --- the plug-in interface ---------------------------------------------------------------------


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[str]:
    """A real distribution on sys.path declaring a `lineage.judges` entry point."""
    (tmp_path / "probe_judge.py").write_text(
        textwrap.dedent(
            """
            from lineage.claims.judges import Judgement

            class AlwaysUnknown:
                name = "probe-nli"
                version = "0.1"

                async def judge(self, premise, hypothesis):
                    return Judgement("unknown", "an operator's model", self.name, self.version)

            def make_judge():
                return AlwaysUnknown()

            def make_nothing():
                return object()
            """
        )
    )
    info = tmp_path / "probe_judge-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-judge\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nprobe-nli = probe_judge:make_judge\n"
        "broken = probe_judge:make_nothing\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        yield "probe-nli"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("probe_judge", None)


async def test_an_entry_point_judge_is_chosen_by_setting(installed_plugin: str) -> None:
    judge = judge_from_settings(Settings(claim_judge=installed_plugin))
    assert (judge.name, judge.version) == ("probe-nli", "0.1")
    judgement = await judge.judge("premise", "claim")
    assert judgement.outcome == "unknown" and judgement.reason == "an operator's model"
    with pytest.raises(BadParameter, match="lacks name, version, judge"):
        judge_from_settings(Settings(claim_judge="broken"))
    with pytest.raises(BadParameter, match="offline, openai, broken, probe-nli"):
        judge_from_settings(Settings(claim_judge="no-such-judge"))


def test_built_in_judges_by_setting() -> None:
    assert isinstance(judge_from_settings(Settings()), OfflineJudge)
    with pytest.raises(BadParameter, match="LINEAGE_JUDGE_BASE_URL"):
        judge_from_settings(Settings(claim_judge="openai"))
    grader = judge_from_settings(
        Settings(claim_judge="openai", judge_base_url="http://127.0.0.1:9", judge_model="m")
    )
    assert isinstance(grader, OpenAICompatibleJudge)


def test_texts_past_the_limits_are_not_read() -> None:
    from lineage.claims.judges.offline import MAX_CLAIM_CHARS, MAX_PREMISE_CHARS

    long_premise = OFFLINE.judge_sync("Pets are allowed. " * (MAX_PREMISE_CHARS // 18 + 1), "x")
    assert long_premise.outcome == "unknown" and "too long" in long_premise.reason
    long_claim = OFFLINE.judge_sync("Pets are allowed.", "Pets are allowed " * MAX_CLAIM_CHARS)
    assert long_claim.outcome == "unknown" and str(MAX_CLAIM_CHARS) in long_claim.reason
