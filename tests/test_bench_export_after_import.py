"""bench/export_after_import.py runs a round end to end at a small size and reports each figure
(no timing asserted: bench/RESULTS-export-after-import.md holds the 50,000-record figures)."""

import asyncio
import uuid
from pathlib import Path

import pytest

from bench.export_after_import import CASES, measure_round, report
from lineage.bundle.export import ANALYZE_FROM
from tests.conftest import server_url


@pytest.mark.needs_database
def test_the_export_after_import_bench_times_first_and_steady_exports(tmp_path: Path) -> None:
    records = ANALYZE_FROM + 200  # enough for the export to check its statistics
    tag = f"_{uuid.uuid4().hex[:8]}"
    measured = asyncio.run(measure_round(records, server_url(), tmp_path, 2, tag))
    assert len(measured.cases) == len(CASES)
    for case in measured.cases:
        assert case.fill_seconds > 0 and case.first.seconds > 0
        assert len(case.steady) == 2 and all(export.seconds > 0 for export in case.steady)
    text = report([measured], {"command": "test"}).markdown()
    for figure in ("first export, right after", "export in steady state", "first export / steady"):
        assert text.count(figure) == len(CASES), figure
    assert "import_bundle" in text and "<= 1.5x" in text
