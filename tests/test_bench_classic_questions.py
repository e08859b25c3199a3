"""The classic-table benches run end to end on a small DAG and report every figure (they
measure speed; these assert none): the design card's questions beside the tutorial SQL
(bench/classic_questions.py) and the bytes and rate of a write (bench/write_bytes.py)."""

import argparse
import asyncio
import uuid

import pytest

from bench import classic_questions, write_bytes
from bench.classic import write_tutorial_table
from bench.database import drop, recreate_empty, url_for
from tests.conftest import server_url

RECORDS = 2000
pytestmark = pytest.mark.needs_database


def test_each_question_is_timed_beside_the_tutorial_on_the_same_answers() -> None:
    base, dbname = server_url(), f"lineage_bench_questions_{uuid.uuid4().hex[:8]}"

    async def load() -> str:
        url = await recreate_empty(base, dbname)
        await write_tutorial_table(url, "classic_provenance", RECORDS)
        return url

    try:
        url = asyncio.run(load())
        arguments = argparse.Namespace(
            classic_url=url, table="public.classic_provenance", reuse=False, repeats=1,
            timeout_ms=60_000, starts=20,
        )  # fmt: skip
        report = asyncio.run(classic_questions.main(arguments))
    finally:
        asyncio.run(drop(base, dbname))
        asyncio.run(drop(base, classic_questions.lineage_database_name(url_for(base, dbname))))
    questions = report["questions"]
    assert len(questions) == len(classic_questions.QUESTIONS)
    for question, figures in questions.items():
        answers = figures["answers"]
        # Both sides find the same answers, as ids and as records.
        assert answers["tutorial ids"] == answers["lineage ids"] > 0, question
        assert answers["tutorial records"] == answers["lineage records"] > 0, question
        # ...and as the service serves them: a CSV line an id, an NDJSON line a record.
        assert answers["lineage ids CSV"] == answers["tutorial ids"], question
        assert answers["lineage ids JSON"] == answers["tutorial ids"], question
        assert answers["lineage records NDJSON"] == answers["tutorial records"], question
        # ...and the same records read by id alone on each side.
        assert answers["tutorial records by id alone"] == answers["tutorial records"], question
        assert answers["lineage records by id alone"] == answers["tutorial records"], question
        assert all(ms > 0 for ms in figures["median_ms"].values()), question
        assert set(figures["faster"]) == {"ids", "records"}
        assert set(figures["faster_as_served"]) == {"ids", "ids as JSON", "records"}
    # The walks down from typical starts (each found the tutorial's answers, or the run stopped).
    for kind in ("document", "chunk"):
        walked = report["walks_down"][kind]
        assert walked["starts"] == 20, kind
        assert all(walked[side]["p90_ms"] >= walked[side]["p50_ms"] > 0
                   for side in classic_questions.WALK_DOWN_SIDES), (kind, walked)  # fmt: skip
    stored = report["stored_bytes"]
    assert stored["lineage"] == sum(stored["lineage_by_table"].values()) > stored["tutorial"] > 0
    # Every record is in the verifiable log, as appends leave it, and counted with the rest.
    assert report["records"]["in_its_verifiable_log"] == report["records"]["lineage"] >= RECORDS
    assert {"log_leaves", "events", "provenance"} <= set(stored["lineage_by_table"])


def test_the_write_bench_reports_bytes_and_rates_for_both_sides() -> None:
    report = asyncio.run(write_bytes.run(RECORDS, 500, merge_every=RECORDS // 2))
    # The tutorial's DAG ends on a whole answer; the append's first record sets up the tenant.
    assert report["records"]["lineage"] == report["records"]["tutorial"] - 1 >= RECORDS
    for side in ("tutorial_copy", "lineage_append"):
        figures = report[side]
        assert figures["records_per_s"] > 0 and figures["wal_bytes_per_record"] > 0, side
        assert figures["stored_bytes_per_record"] > 0, side
    relations = report["lineage_append"]["stored_bytes_per_record_by_relation"]
    assert {"provenance", "invalidation_postings", "provenance_p_open_id"} <= set(relations)
    assert report["lineage_over_tutorial"]["append_rate_of_copy"] > 0
