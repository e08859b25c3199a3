"""bench.postings_merge runs end to end at a small size and reports every figure (it asserts
no timing)."""

import asyncio

import pytest

from bench import postings_merge

pytestmark = [pytest.mark.needs_database, pytest.mark.slow]


def test_the_merge_bench_reports_rows_bytes_and_reads_on_both_sides() -> None:
    report = asyncio.run(postings_merge.run(1500, 10, passes=1))
    assert report["merge"]["rows_merged"] > report["merge"]["rows_written"] > 0
    assert report["after"]["rows"] < report["before"]["rows"]
    assert report["after"]["ids_a_row"] > report["before"]["ids_a_row"]
    for figures in report["reads_ms"].values():
        assert figures["answers"] > 0 and figures["before"] > 0 and figures["after"] > 0
