"""The worked example runs as a user would run it, against a test database, and records what it
prints."""

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import asyncpg

from lineage.claims.verify import current_verdicts
from lineage.db.database import Database
from lineage.services import walks
from lineage.services.demo import ANSWER_ID, load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "policy_pipeline.py"
ANSWER = re.compile(r"^answer (ctx_[0-9a-f]{32}): ", re.MULTILINE)
POLICIES = {"s3://policies/employee-leave.md", "s3://policies/contractors.md"}


def run_example(database_url: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGE_")}
    finished = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        env=env | {"LINEAGE_DATABASE_URL": database_url},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr
    return finished.stdout


async def test_the_policy_pipeline_records_and_walks_back_its_answer(
    database_url: str,
    pool: asyncpg.Pool,
    database: Database,
    settings: Settings,
    owner: asyncpg.Connection,
) -> None:
    printed = await asyncio.to_thread(run_example, database_url)
    [answer_id] = ANSWER.findall(printed)

    walk = await walks.walk_back(database, settings, "default", answer_id, None)
    kinds = {node["kind"] for node in walk.nodes}
    assert kinds == {
        "answer", "claim", "prompt", "summary", "retrieval", "query", "embedding", "chunk",
        "document",
    }  # fmt: skip
    assert {n["source_uri"] for n in walk.nodes if n["kind"] == "document"} == POLICIES
    assert f"walk-back of {answer_id} ({len(walk.nodes)} records):" in printed
    for node in walk.nodes:
        assert node["context_id"] in printed

    verdicts = sorted(
        row["verdict"] for row in await current_verdicts(database, "default", answer_id)
    )
    assert verdicts == ["supported", "supported", "uncited"]
    assert "1 of 3 failing (uncited 1, supported 2)" in printed
    assert 'model: "fake-model-1"' in printed

    # A second run asks again: the documents, chunks and embeddings are not recorded twice.
    again = await asyncio.to_thread(run_example, database_url)
    assert ANSWER.findall(again) != [answer_id]
    counts = dict(
        await owner.fetch("SELECT kind, count(*) FROM provenance GROUP BY kind ORDER BY kind")
    )
    assert counts["document"] == 2
    assert counts["chunk"] == counts["embedding"] == 6
    assert counts["answer"] == counts["query"] == 2


async def test_another_pipeline_in_the_tenant_marks_nothing_on_the_example(
    database_url: str, database: Database, settings: Settings, store: PostgresStore
) -> None:
    """The demo's loader@1.2.0, chunker@2.3.1 and summarise@7 share the tenant (and its source
    URIs) with the example's loader@1.0, chunker@1.0 and summarise@1: versions are compared
    within one walk-back, so neither pipeline's walk is marked for the other's versions."""
    await load_incident(store)
    printed = await asyncio.to_thread(run_example, database_url)
    [answer_id] = ANSWER.findall(printed)
    hops = await walks.suspicious_hops(database, settings, "default", answer_id, None)
    assert [h for h in hops if h["reason"] == "old_transform_version"] == []
    # The example's documents are the newest revisions of their URIs: nothing else is stale.
    assert hops == []

    demo = await walks.suspicious_hops(database, settings, "default", ANSWER_ID, None)
    [old] = [h for h in demo if h["reason"] == "old_transform_version"]
    assert old["context_id"] == "chunk_42"
    assert old["detail"] == (
        "chunker@1.4 is older than chunker@2.3.1, which made chunk_17 in the same walk"
    )
