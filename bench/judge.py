"""The offline judge's precision and recall per label on the labelled pairs and the probes,
optionally beside an earlier checkout's judge; writes bench/RESULTS-judge.md.

    python -m bench.judge                          # this checkout's judge
    python -m bench.judge --before DIR             # DIR: git archive REF lineage | tar -x -C DIR

The labelled pairs (tests/data/claims/pairs.jsonl, the copy of the shared test vectors) are
split once, by premise: pairs that share a premise stay together, and the groups alternate in
file order between a tuning half (groups 1, 3, 5, ...) and a held-out half (groups 2, 4, ...).
Rules may be written while looking at the tuning half's answers only; the held-out half is the
figure that says whether they generalise. The probes (tests/data/claims/probes.jsonl) are
claims written to tempt a judge into a false "entailed"; any "entailed" on a non-entailment
probe is listed. The earlier judge runs in a subprocess with PYTHONPATH=DIR, so both judges
read the same files.
"""

import argparse
import json
import math
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from lineage.claims.judges import LABELS, OfflineJudge, score_judge

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "claims"
PAIRS = DATA / "pairs.jsonl"
PROBES = DATA / "probes.jsonl"
ROWS = ("entailment", "contradiction", "neutral", "not_entailment")

Case = dict[str, str]


def read_cases(path: Path) -> list[Case]:
    cases = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for case in cases:
        if case.get("label") not in LABELS:
            raise ValueError(f"{path}: {case.get('id')!r} has label {case.get('label')!r}")
    return cases


def split_by_premise(pairs: list[Case]) -> tuple[list[Case], list[Case]]:
    """(tuning, held out): groups of pairs sharing a premise, alternating in file order, those
    with a neutral pair apart from the rest so that both halves hold some (there are few)."""
    groups: dict[str, list[Case]] = {}
    for pair in pairs:
        groups.setdefault(pair["premise"], []).append(pair)
    tuning: list[Case] = []
    held_out: list[Case] = []
    seen = {False: 0, True: 0}
    for group in groups.values():
        stratum = any(pair["label"] == "neutral" for pair in group)
        (tuning if seen[stratum] % 2 == 0 else held_out).extend(group)
        seen[stratum] += 1
    return tuning, held_out


def judge_all() -> dict[str, dict[str, str]]:
    """Every case of both files judged by the importable OfflineJudge: id -> outcome, reason."""
    judge = OfflineJudge()
    answers: dict[str, dict[str, str]] = {}
    for name, path in (("pairs", PAIRS), ("probes", PROBES)):
        for case in read_cases(path):
            judgement = judge.judge_sync(case["premise"], case["hypothesis"])
            answers[f"{name}/{case['id']}"] = {
                "outcome": judgement.outcome,
                "reason": judgement.reason,
                "version": judgement.judge_version,
            }
    return answers


def judge_earlier(checkout: Path) -> dict[str, dict[str, str]]:
    """The same answers from an earlier checkout's judge, in a subprocess that imports it
    (-P: the checkout, not the working directory, comes first on the path)."""
    here = Path(__file__).resolve().parent.parent
    environment = {**os.environ, "PYTHONPATH": f"{checkout.resolve()}{os.pathsep}{here}"}
    done = subprocess.run(
        [sys.executable, "-P", "-m", "bench.judge", "--answers-json"],
        cwd=here,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    answers: dict[str, dict[str, str]] = json.loads(done.stdout)
    return answers


def _fmt(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"


def score_table(
    cases: list[Case], prefix: str, columns: dict[str, dict[str, dict[str, str]]]
) -> list[str]:
    """A markdown table: per label, support, then precision / recall / unknown per judge."""
    scores = {
        name: score_judge((c["label"], answers[f"{prefix}/{c['id']}"]["outcome"]) for c in cases)
        for name, answers in columns.items()
    }
    header = ["label", "support"]
    for name in columns:
        header += [f"precision ({name})", f"recall ({name})", f"unknown ({name})"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in ROWS:
        support = next(iter(scores.values()))[row]["support"]
        cells = [row, f"{support:.0f}"]
        for name in columns:
            s = scores[name][row]
            cells += [
                _fmt(s["precision"]),
                _fmt(s["recall"]),
                f"{s['support'] - s['answered']:.0f}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def false_entailed(cases: list[Case], prefix: str, answers: dict[str, dict[str, str]]) -> list[str]:
    return [
        c["id"]
        for c in cases
        if c["label"] != "entailment" and answers[f"{prefix}/{c['id']}"]["outcome"] == "entailed"
    ]


def changes(
    cases: list[Case],
    prefix: str,
    before: dict[str, dict[str, str]],
    after: dict[str, dict[str, str]],
) -> list[str]:
    lines = []
    for c in cases:
        old, new = before[f"{prefix}/{c['id']}"], after[f"{prefix}/{c['id']}"]
        if old["outcome"] != new["outcome"]:
            lines.append(
                f"- {prefix}/{c['id']} ({c['label']}): {old['outcome']} -> {new['outcome']}: "
                f"{c['hypothesis']!r} from {c['premise']!r} ({new['reason']})"
            )
    return lines


def report(before: dict[str, dict[str, str]] | None, command: str) -> str:
    after = judge_all()
    columns = {"before": before, "after": after} if before else {"now": after}
    pairs, probes = read_cases(PAIRS), read_cases(PROBES)
    tuning, held_out = split_by_premise(pairs)
    version = after[f"pairs/{pairs[0]['id']}"]["version"]
    out = [
        "# The offline judge on the labelled pairs and the probes",
        "",
        f"Run on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `{command}` (OfflineJudge version "
        f"{version}). Precision and recall per gold label as `score_judge` defines them: "
        "`entailed` predicts entailment, `not_entailed` predicts contradiction or neutral (one "
        "shared precision), `unknown` predicts nothing (it lowers recall, never precision). "
        "`unknown` counts the pairs of that label left undecided.",
        "",
        "The labelled pairs are split once by premise (pairs sharing a premise stay together; "
        "groups alternate between the halves, those holding a neutral pair apart so that both "
        "halves hold some). Rules are written looking at the tuning half's answers only: the "
        "held-out half says whether they generalise. The probes are written to tempt a judge "
        "into a false `entailed`; some were added beside the rules they guard, so they bound "
        "false entailment and are no held-out measure of recall.",
    ]
    sections = [
        (f"Held-out half of the labelled pairs ({len(held_out)} pairs, not tuned on)", held_out),
        (f"Tuning half of the labelled pairs ({len(tuning)} pairs)", tuning),
        (f"All labelled pairs ({len(pairs)}, {PAIRS.name})", pairs),
    ]
    for title, cases in sections:
        out += ["", f"## {title}", "", *score_table(cases, "pairs", columns)]
    out += ["", f"## Probes ({len(probes)}, {PROBES.name})", ""]
    out += score_table(probes, "probes", columns)
    for name, answers in columns.items():
        wrong = false_entailed(pairs, "pairs", answers) + false_entailed(probes, "probes", answers)
        out += ["", f"False `entailed` ({name}): {', '.join(wrong) or 'none'}."]
    if before:
        out += ["", "## Answers that changed", ""]
        out += changes(pairs, "pairs", before, after) + changes(probes, "probes", before, after)
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="an earlier checkout's directory")
    parser.add_argument("--output", type=Path, default=Path("bench/RESULTS-judge.md"))
    parser.add_argument(
        "--answers-json", action="store_true", help="print every answer as JSON (for --before)"
    )
    arguments = parser.parse_args()
    if arguments.answers_json:
        json.dump(judge_all(), sys.stdout)
        return
    if arguments.before and not (arguments.before / "lineage" / "claims").is_dir():
        parser.error(
            f"--before {arguments.before}: no lineage/claims there (git archive REF lineage)"
        )
    before = judge_earlier(arguments.before) if arguments.before else None
    command = "python -m bench.judge" + (f" --before {arguments.before}" if before else "")
    text = report(before, command)
    arguments.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
