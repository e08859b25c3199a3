"""SQL that several named queries share is written once, in lineage/sql/include/, and the loader
fills it into each query's include region: every file is what the service runs, so psql runs it
as it is; no walk is written out anywhere else; and each file with a walk, run by psql, lists
what the service answers."""

import re
from pathlib import Path
from typing import Any

import pytest

from lineage import derive
from lineage.db.database import Database
from lineage.db.functions import FUNCTIONS_DIR
from lineage.db.named_sql import INCLUDE_DIR, QUERIES, SQL_DIR, expand, fill_statements, fragments
from lineage.services import reads
from lineage.services.demo import ANSWER_ID, CONTRACTOR_POLICY, load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.psql import run_psql

INCLUDE = re.compile(r"^[ \t]*-- include: (\w+)$", re.MULTILINE)
REGION = re.compile(r"^[ \t]*-- include: (\w+)\n.*?^[ \t]*-- end include: \1\n", re.M | re.S)
# What each query with a walk is asked, on the demo incident, besides tenant and max_depth.
ASKED: dict[str, dict[str, Any]] = {
    "walk_back": {"context_id": ANSWER_ID},
    "suspicious_hops": {"context_id": ANSWER_ID},
    "blast_radius": {"context_ids": ["doc_contractors_v1"], "kind": "all"},
    "blast_radius_ids": {"context_ids": ["doc_contractors_v1"], "kind": "all"},
    "blast_radius_by_source": {"source_uri": CONTRACTOR_POLICY, "kind": "all"},
    "blast_radius_ids_by_source": {"source_uri": CONTRACTOR_POLICY, "kind": "all"},
    "stale_sources": {"source_uri": "any", "kind": "all"},
}
# The invalidations, asked what the demo's old chunker and first index snapshot reach.
INVALIDATIONS: dict[str, dict[str, Any]] = {
    f"invalidate{ids}_by_{start}": {start: value, "kind": "all"}
    for start, value in (("index_snapshot", "idx_2026_08_01"), ("transform_version", "chunker@1.4"))
    for ids in ("", "_ids")
}
# Asked once an embedding record (by this model) stands under the demo's chunk_42.
EMBEDDING_MODEL = "text-embedding-ada-002"
EMBEDDED: dict[str, dict[str, Any]] = {
    f"invalidate{ids}_by_embedding_model": {"embedding_model": EMBEDDING_MODEL, "kind": "all"}
    for ids in ("", "_ids")
}


def sql_files() -> list[Path]:
    return sorted(SQL_DIR.glob("*.sql"))


def test_every_function_that_answers_a_query_holds_its_statement() -> None:
    files = sorted(FUNCTIONS_DIR.glob("*.sql"))
    differ = [
        path.name
        for path in files
        if fill_statements(path.read_text(), QUERIES) != path.read_text()
    ]
    assert differ == [], (
        f"{differ}: a statement region differs from its query in lineage/sql/; "
        "run python -m lineage.db.include_sql"
    )
    walk = (FUNCTIONS_DIR / "lineage_walk_back.sql").read_text()
    assert QUERIES["walk_back"].sql.splitlines()[0] in walk


def test_every_file_is_what_the_service_runs() -> None:
    shared = fragments()
    differ = [path.name for path in sql_files() if path.read_text() != QUERIES[path.stem].text]
    differ += [  # a fragment that includes another holds it as the queries do
        path.name
        for path in sorted(INCLUDE_DIR.glob("*.sql"))
        if expand(path.read_text(), shared, path.name) != path.read_text()
    ]
    assert differ == [], (
        f"{differ}: an include region differs from its fragment in lineage/sql/include/; "
        "run python -m lineage.db.include_sql"
    )


def test_each_walk_is_written_once() -> None:
    shared = fragments()
    users = {
        name: sorted(path.stem for path in sql_files() if name in INCLUDE.findall(path.read_text()))
        for name in shared
    }
    assert users == {
        "embedding_walk": sorted(EMBEDDED),
        "judged_verdict": [
            "claim_verdicts",
            "claims_by_produced_by",
            "drift_by_produced_by",
            "statement_verdicts",
            "suspicious_hops",
            "verdict_history",
        ],
        "posting_probe": sorted(INVALIDATIONS),
        "postings_complete": sorted(INVALIDATIONS),
        "records_in_order": ["invalidate_by_index_snapshot", "invalidate_by_transform_version"],
        "source_radius": ["blast_radius_by_source", "blast_radius_ids_by_source"],
        "verdicts_on": ["claim_verdicts", "statement_verdicts", "verdict_history"],
        "walk_down_from_ids": ["blast_radius", "blast_radius_ids"],
        "walk_down": sorted({*ASKED, *INVALIDATIONS, *EMBEDDED} - {"walk_back", "suspicious_hops"}),
        "walk_up": ["suspicious_hops", "walk_back"],
    }
    for path in sql_files():
        outside = REGION.sub("", path.read_text())
        for name in ("walk_down", "walk_up"):  # the steps; a radius reads its walk as others do
            lines = {line.strip() for line in shared[name].splitlines() if len(line.strip()) >= 30}
            written_out = sorted(line for line in lines if line in outside)
            assert written_out == [], f"{path.name} writes out lines of include/{name}.sql"


def test_a_region_holds_its_fragment_whatever_it_held() -> None:
    shared = {"step": "  UNION ALL SELECT 1\n"}
    stale = "WITH x AS (\n  -- include: step\n  an old copy\n  -- end include: step\n)\n"
    filled = "WITH x AS (\n  -- include: step\n  UNION ALL SELECT 1\n  -- end include: step\n)\n"
    assert expand(stale, shared, "made-up.sql") == filled
    with pytest.raises(ValueError, match="needs its `-- end include: NAME`"):
        expand("  -- include: step\n  SELECT 1\n", shared, "made-up.sql")
    with pytest.raises(ValueError, match=r"there is no include/other\.sql"):
        expand("  -- include: other\n  -- end include: other\n", shared, "made-up.sql")
    # A region inside another's copy is the outer fragment's to fill.
    nested = "-- include: outer\nold\n  -- include: step\n  old\n  -- end include: step\n"
    outer = {"outer": "new\n  -- include: step\n  UNION ALL SELECT 1\n  -- end include: step\n"}
    assert expand(nested + "-- end include: outer\n", outer, "made-up.sql") == (
        "-- include: outer\n" + outer["outer"] + "-- end include: outer\n"
    )


def psql_value(value: Any) -> str:
    return "{" + ",".join(value) + "}" if isinstance(value, list) else str(value)


@pytest.mark.parametrize("name", sorted({**ASKED, **INVALIDATIONS, **EMBEDDED}))
async def test_each_walk_file_runs_under_psql_and_lists_what_the_service_answers(
    name: str, database_url: str, store: PostgresStore, database: Database, settings: Settings
) -> None:
    await load_incident(store)
    if name in EMBEDDED:
        await derive(store, ["chunk_42"], "[0.1, 0.2]", "embedding", produced_by=EMBEDDING_MODEL)
    asked = {**ASKED, **INVALIDATIONS, **EMBEDDED}[name]
    values = {"tenant_id": "default", "max_depth": 20, **asked}
    served = [row["context_id"] for row in await reads.run(database, settings, name, **values)]
    printed = await run_psql(
        database_url, SQL_DIR / f"{name}.sql", {k: psql_value(v) for k, v in values.items()}, "-At"
    )
    assert served
    assert [line.split("|")[0] for line in printed.splitlines()] == served


async def test_the_embedding_models_ids_are_its_records_walk(
    store: PostgresStore, database: Database, settings: Settings
) -> None:
    """The ids file lists the rows of the records file, in its order, without reading them."""
    await load_incident(store)
    await derive(store, ["chunk_42"], "[0.1, 0.2]", "embedding", produced_by=EMBEDDING_MODEL)
    listed: list[tuple[Any, ...]] = []
    for kind in ("all", "any", "answer", "chunk", "summary"):
        for max_depth in (0, 1, 2, 20):
            values = {"tenant_id": "default", "embedding_model": EMBEDDING_MODEL,
                      "kind": kind, "max_depth": max_depth}  # fmt: skip
            rows = {
                name: [
                    (r["context_id"], r["kind"], r["depth"], r["truncated"], r["expired"])
                    for r in await reads.run(database, settings, name, **values)
                ]
                for name in EMBEDDED
            }
            assert (
                rows["invalidate_ids_by_embedding_model"] == rows["invalidate_by_embedding_model"]
            ), (kind, max_depth)
            listed += rows["invalidate_ids_by_embedding_model"]
    assert {row[1] for row in listed} >= {"chunk", "summary", "answer"}
    assert any(row[3] for row in listed) and not all(row[3] for row in listed)
