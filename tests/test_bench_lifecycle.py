"""bench/lifecycle.py runs end to end at a tiny size and reports each figure (none asserted)."""

import asyncio
import uuid
from pathlib import Path

import pytest

from bench.lifecycle import measure
from tests.conftest import server_url


@pytest.mark.needs_database
def test_the_lifecycle_bench_exports_and_imports_a_small_dag(tmp_path: Path) -> None:
    figures = asyncio.run(measure(500, server_url(), tmp_path, f"_{uuid.uuid4().hex[:8]}"))
    assert figures.records >= 500 and figures.bundle_mb > 0
    for run in (figures.export, figures.imported):
        assert run.seconds > 0 and run.peak_rss_mb > 0
    text = figures.markdown("test")
    assert "lineage export bundle" in text and "records/s" in text
