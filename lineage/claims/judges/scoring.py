"""Measure a judge against labelled pairs: precision and recall per label."""

import math
from collections.abc import Iterable, Mapping

from lineage.claims.judges.base import LABELS, OUTCOMES


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
