"""The benchmark runs end to end at a tiny size and reports every figure (no timing is
asserted: figures belong in bench/RESULTS.md), and its generator makes the DAG it promises."""

import asyncio
import dataclasses
import random
import re
import uuid
from collections import Counter
from pathlib import Path

import asyncpg
import pytest

from bench import invalidation
from bench.citus import compare
from bench.classic import (
    ClassicTableError,
    TutorialDag,
    picks_from,
    project_row,
    read_classic,
    write_tutorial_table,
)
from bench.dag import OLD_CHUNKER, RETRIEVED, Generator, Row, parse_size, snapshot_name
from bench.database import drop, load, recreate, url_for
from bench.run import ingest_rows, run, smoke_plan
from lineage.core.record import NewContext, validate
from lineage.db.named_sql import QUERIES
from tests.citus_cluster import CitusCluster
from tests.conftest import server_url

FIGURE_GROUPS = {
    "walk-back of an answer": 6,
    "blast radius of a typical document (answers)": 4,
    "every answer of the hottest document": 8,
    "invalidation (answers)": 2,
    "ingest": 6,
    "load": 1,
    "start-up": 2,
    # signing, root sources, row security (the log queue is part of the append statement now)
    "feature cost (batch append)": 3,
    "feature cost (walk-back)": 1,
    "feature cost (HTTP)": 1,
}


def test_the_generator_makes_a_valid_rag_dag_parents_first() -> None:
    generator = Generator(5000, "default")
    seen: dict[str, dict[str, int]] = {}
    kinds: Counter[str] = Counter()
    for row, roots in generator.rows():
        context_id, parent_ids, kind, source_uri = row[1], row[2], row[3], row[4]
        validate(NewContext(context_id=context_id, parent_ids=parent_ids, kind=kind,
                            source_uri=source_uri, content_hash=row[5],
                            transform=row[6], transform_version=row[7]))  # fmt: skip
        assert all(p in seen for p in parent_ids), f"{context_id} comes before a parent"
        expected: dict[str, int] = {}
        for parent in parent_ids:
            for source, depth in seen[parent].items():
                expected[source] = min(expected.get(source, depth + 1), depth + 1)
        assert roots == (expected if parent_ids else {source_uri: 0})
        seen[context_id] = roots
        kinds[kind] += 1
        if kind == "retrieval":
            assert len(parent_ids) == RETRIEVED + 1  # the query and 8 chunks
    assert generator.count == len(seen)
    assert kinds["answer"] == generator.answers
    assert kinds["query"] == kinds["retrieval"] == kinds["answer"]
    assert kinds["summary"] == kinds["claim"] == 2 * kinds["answer"]
    assert {"document", "chunk", "embedding"} <= set(kinds)
    picks = generator.picks
    assert picks.hottest_source_uri and picks.typical_source_uris and picks.answer_ids


def test_sizes_read_as_records_and_bad_sizes_say_what_to_use() -> None:
    assert parse_size("100k") == 100_000
    assert parse_size("1M") == 1_000_000
    assert parse_size("25_000") == 25_000
    for bad in ("big", "10"):
        with pytest.raises(ValueError, match="size"):
            parse_size(bad)


@pytest.mark.slow
def test_the_smoke_bench_reports_every_figure(tmp_path: Path) -> None:
    output = tmp_path / "RESULTS.md"
    plan = dataclasses.replace(smoke_plan(server_url(), output), startup=True)
    try:
        report = asyncio.run(run(plan))
    finally:
        asyncio.run(drop(plan.server_url, plan.database))
    groups = Counter(figure.group for figure in report.figures)
    assert dict(groups) == FIGURE_GROUPS
    text = output.read_text()
    for key in ("machine", "PostgreSQL", "date", "size", "features on"):
        assert f"**{key}**" in text
    # The partitioned tables' sizes are their partitions' (the parent's own is 0 bytes).
    sizes = re.search(r"\*\*table sizes\*\*: provenance ([\d,]+) (\w+),", text)
    assert sizes and sizes.group(2) != "bytes", sizes
    assert re.search(r"side tables \d+\.\d\dx provenance", text)
    for figure in report.figures:
        assert f"| {figure.name} |" in text
        assert figure.samples >= 1
    load = next(f for f in report.figures if f.group == "load")
    assert load.met, load.note  # no 5xx, nothing lost, no duplicates


@pytest.mark.citus
@pytest.mark.slow
def test_the_citus_bench_reports_every_figure_at_a_tiny_size(citus: CitusCluster) -> None:
    dbname = f"lineage_bench_citus_{uuid.uuid4().hex[:8]}"
    try:
        figures = asyncio.run(compare(server_url(), citus, 600, 10, 300, dbname))
    finally:
        asyncio.run(drop(server_url(), dbname))
    for backend in ("plain_postgresql", "citus"):
        measured = figures[backend]
        assert measured["walk_back_ms"]["samples"] > 0, measured
        assert measured["blast_radius_ms"]["samples"] > 0, measured
        assert measured["answers_per_typical_document_p50"] > 0, measured
        assert measured["ingest_two_tenants_records_per_s"] > 0, measured
    assert set(figures["citus_over_plain"]) == {
        "walk_back_ms_p50", "walk_back_ms_p99", "blast_radius_ms_p50", "blast_radius_ms_p99",
        "ingest",
    }  # fmt: skip


def test_the_tutorial_dag_has_the_shape_it_promises_parents_first() -> None:
    seen: set[str] = set()
    kinds: Counter[str] = Counter()
    for record_id, parents, kind, *_ in TutorialDag(3000).rows():
        assert all(p in seen for p in parents), f"{record_id} comes before a parent"
        if kind == "retrieval":
            assert len(parents) == RETRIEVED
        if kind == "summary":
            assert len(parents) == 1 + 3  # the retrieval and 3 of its chunks
        seen.add(record_id)
        kinds[kind] += 1
    assert kinds["summary"] == kinds["claim"] == 2 * kinds["retrieval"] == 2 * kinds["answer"]
    assert set(kinds) == {"document", "chunk", "retrieval", "summary", "claim", "answer"}


@pytest.mark.slow
def test_the_bench_runs_every_figure_on_a_classic_table_it_did_not_make(tmp_path: Path) -> None:
    source = f"lineage_bench_classic_source_{uuid.uuid4().hex[:8]}"
    table = f"tutorial.t{uuid.uuid4().hex[:8]}"
    output = tmp_path / "RESULTS.md"
    plan = dataclasses.replace(
        smoke_plan(server_url(), output),
        classic_table=table,
        classic_url=url_for(server_url(), source),
    )
    try:
        source_url = asyncio.run(recreate(server_url(), source))
        asyncio.run(_execute(source_url, "CREATE SCHEMA tutorial"))
        written = asyncio.run(write_tutorial_table(source_url, table, 1000))
        report = asyncio.run(run(plan))
    finally:
        asyncio.run(drop(plan.server_url, plan.database))
        asyncio.run(drop(server_url(), source))
    groups = Counter(figure.group for figure in report.figures)
    assert dict(groups) == FIGURE_GROUPS | {"start-up": 1}
    text = output.read_text()
    assert f"{written:,} records" in text and "classic schema" in text
    for figure in report.figures:
        assert f"| {figure.name} |" in text
        assert figure.samples >= 1
    invalidation = [f for f in report.figures if f.group == "invalidation (answers)"]
    assert any("chunker@1.0" in f.name for f in invalidation)  # the older chunker
    assert all(int(f.note.split()[0].replace(",", "")) > 0 for f in invalidation), invalidation


@pytest.mark.needs_database
def test_a_classic_table_that_cannot_be_loaded_says_which_row_and_why() -> None:
    source = f"lineage_bench_classic_bad_{uuid.uuid4().hex[:8]}"
    try:
        url = asyncio.run(recreate(server_url(), source))
        asyncio.run(write_tutorial_table(url, "classic", 1000))
        dangling = "UPDATE classic SET parent_ids = '{nowhere}' WHERE id = (SELECT id FROM classic "
        asyncio.run(_execute(url, dangling + "WHERE kind = 'claim' LIMIT 1)"))
        with pytest.raises(ClassicTableError, match="parent 'nowhere' is not in the table"):
            asyncio.run(read_classic(url, "classic", "default"))
        asyncio.run(_execute(url, "ALTER TABLE classic DROP COLUMN snapshot"))
        with pytest.raises(ClassicTableError, match="needs the columns"):
            asyncio.run(read_classic(url, "classic", "default"))
    finally:
        asyncio.run(drop(server_url(), source))


def test_the_picks_start_from_documents_the_oldest_version_and_the_commonest_snapshot() -> None:
    def row(record_id: str, parents: list[str], kind: str, **more: str | None) -> Row:
        columns = {"transform": None, "version": None, "source_uri": None, "snapshot": None}
        return project_row("default", {"id": record_id, "parent_ids": parents, "kind": kind,
                                       "content_hash": "ab" * 32, "created_at": None,
                                       **columns, **more})  # fmt: skip

    rows = [
        row("d1", [], "document", source_uri="doc://one"),
        row("d2", [], "document", source_uri="doc://two"),
        row("q1", [], "query", source_uri="query://1"),
        row("c1", ["d1"], "chunk", transform="chunker", version="1.10"),
        row("c2", ["d1"], "chunk", transform="chunker", version="1.9"),
        row("c3", ["d2"], "chunk", transform="chunker", version="1.9"),
        row("r1", ["q1", "c1", "c2"], "retrieval", snapshot="idx-b"),
        row("r2", ["c3"], "retrieval", snapshot="idx-a"),
        row("r3", ["c1"], "retrieval", snapshot="idx-b"),
        row("a1", ["r1"], "answer"),
    ]
    descendants = Counter({"doc://one": 6, "doc://two": 2, "query://1": 2})
    picks = picks_from(rows, descendants, ["a1"], random.Random(1))
    assert sorted(picks.typical_source_uris) == ["doc://one", "doc://two"]  # not the query
    assert picks.hottest_source_uri == "doc://one"
    assert picks.transform_version == "chunker@1.9"  # PEP 440 order: 1.9 is older than 1.10
    assert picks.snapshot == "idx-b"
    assert rows[0][5] == "sha256:" + "ab" * 32  # a bare hex digest names its algorithm
    assert (picks.answers, picks.records) == (1, len(rows))


@pytest.mark.needs_database
def test_the_loaded_dag_has_every_index_on_every_partition() -> None:
    dbname = f"lineage_bench_indexes_{uuid.uuid4().hex[:8]}"
    try:
        url = asyncio.run(recreate(server_url(), dbname))
        asyncio.run(load(url, 2000))
        # A partitioned index stays invalid while a partition lacks it.
        invalid = asyncio.run(
            _fetch_rows(url, "SELECT indexrelid::regclass::text FROM pg_index WHERE NOT indisvalid")
        )
    finally:
        asyncio.run(drop(server_url(), dbname))
    assert invalid == []


@pytest.mark.needs_database
def test_the_loaded_dag_has_the_postings_an_append_would_have_written() -> None:
    """Invalidation on a loaded DAG reads the loader's postings: they answer what the walk
    answers once a record without postings sends the tenant back to the walk."""
    dbname = f"lineage_bench_postings_{uuid.uuid4().hex[:8]}"
    questions = [
        ("invalidate_ids_by_transform_version", {"transform_version": OLD_CHUNKER}),
        ("invalidate_ids_by_index_snapshot", {"index_snapshot": snapshot_name(0)}),
    ]

    async def answers(url: str) -> list[list[tuple[object, ...]]]:
        found = []
        for name, start in questions:
            query = QUERIES[name]
            values = {"tenant_id": "default", "kind": "any", "max_depth": 20, **start}
            found.append(await _fetch_rows(url, query.sql, *query.arguments(values)))
        return found

    try:
        url = asyncio.run(recreate(server_url(), dbname))
        asyncio.run(load(url, 2000))
        by_postings = asyncio.run(answers(url))
        asyncio.run(
            _execute(
                url,
                "INSERT INTO provenance (tenant_id, context_id, kind, source_uri, content_hash, "
                "created_at) VALUES ('default', 'before_postings', 'document', 's3://old.md', "
                "'sha256:00', now())",
            )
        )
        by_walk = asyncio.run(answers(url))
    finally:
        asyncio.run(drop(server_url(), dbname))
    assert all(by_postings) and by_postings == by_walk


@pytest.mark.needs_database
def test_invalidation_on_a_loaded_dag_finds_the_answers_the_tutorial_sql_finds() -> None:
    """bench.invalidation --url: on a DAG the bench loaded, our records and ids of each question
    count the answers the tutorial SQL counts."""
    dbname = f"lineage_bench_invalidation_url_{uuid.uuid4().hex[:8]}"
    try:
        url = asyncio.run(recreate(server_url(), dbname))
        asyncio.run(load(url, 2000))
        report = asyncio.run(invalidation.loaded(url, repeats=1, explain=False))
    finally:
        asyncio.run(drop(server_url(), dbname))
    answers: dict[str, set[str]] = {}
    for figure in report.figures:
        answers.setdefault(figure.group, set()).add(figure.note.split(" answers")[0])
    assert len(answers) == 2, answers  # by transform version and by index snapshot
    assert all(len(counts) == 1 and counts != {"0"} for counts in answers.values()), answers


@pytest.mark.needs_database
def test_the_loaded_dag_has_the_root_sources_an_append_would_have_written() -> None:
    """A document's blast radius on a loaded DAG reads the loader's postings by source: they
    answer what the walk answers once a record without root sources sends it to the walk."""
    dbname = f"lineage_bench_roots_{uuid.uuid4().hex[:8]}"
    query = QUERIES["blast_radius_ids_by_source"]

    async def radius(url: str, source_uri: str) -> list[tuple[object, ...]]:
        values = {"tenant_id": "default", "source_uri": source_uri, "kind": "all", "max_depth": 20}
        return sorted(await _fetch_rows(url, query.sql, *query.arguments(values)))

    try:
        url = asyncio.run(recreate(server_url(), dbname))
        picks, _ = asyncio.run(load(url, 2000))
        hot = picks.hottest_source_uri
        by_postings = asyncio.run(radius(url, hot))
        kept = asyncio.run(_fetch_rows(url, KEPT_ROOTS))
        posted = asyncio.run(_fetch_rows(url, POSTED_ROOTS))
        numbered = asyncio.run(_fetch_rows(url, NUMBERED))
        asyncio.run(
            _execute(
                url,
                "INSERT INTO provenance (tenant_id, context_id, kind, source_uri, content_hash, "
                f"created_at) VALUES ('default', 'before_roots', 'document', '{hot}', "
                "'sha256:00', now())",
            )
        )
        by_walk = [row for row in asyncio.run(radius(url, hot)) if row[0] != "before_roots"]
    finally:
        asyncio.run(drop(server_url(), dbname))
    assert len(by_postings) > 1 and by_postings == by_walk
    # Each record's sources, named by their numbers, are those the postings list it under.
    assert len(kept) > 2000 and kept == posted
    # Numbered 1.. without a gap: the next append numbers after the highest.
    assert numbered == [(1, True)]


# Each record's root sources as it keeps them (by number), and as the postings list them.
KEPT_ROOTS = """
SELECT p.context_id, k.key, r.depth
FROM provenance AS p
CROSS JOIN LATERAL unnest(p.root_sources, p.root_depths) AS r (key_no, depth)
JOIN invalidation_keys AS k ON k.tenant_id = p.tenant_id AND k.key_no = r.key_no
ORDER BY 1, 2
"""
POSTED_ROOTS = """
SELECT posting.context_id, k.key, ip.depth
FROM invalidation_postings AS ip
CROSS JOIN LATERAL unnest(ip.context_uuids::text[] || ip.context_ids) AS posting (context_id)
JOIN invalidation_keys AS k ON k.tenant_id = ip.tenant_id AND k.key_no = ip.key_no
WHERE k.key LIKE 'source:%'
ORDER BY 1, 2
"""
NUMBERED = "SELECT min(key_no), max(key_no) = count(*) FROM invalidation_keys GROUP BY tenant_id"


async def _fetch_rows(url: str, query: str, *arguments: object) -> list[tuple[object, ...]]:
    connection = await asyncpg.connect(url)
    try:
        return [tuple(row) for row in await connection.fetch(query, *arguments)]
    finally:
        await connection.close()


async def _execute(url: str, statement: str) -> None:
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


def test_ingest_namespaces_whose_hashes_meet_modulo_ten_thousand_still_get_their_own_ids() -> None:
    # The ingest figures write four namespaces of one stamp into one table: shared ids conflict.
    stamp = next(
        n for n in range(1_000_000) if hash(f"copy{n}") % 10_000 == hash(f"derive{n}") % 10_000
    )
    copied = {row[1] for row in ingest_rows(50, f"copy{stamp}", "default")}
    derived = {row[1] for row in ingest_rows(50, f"derive{stamp}", "default")}
    assert copied and derived and not copied & derived
