"""The demo incident: its walk-back names the stale chunker and snapshot and the changed source."""

import json
import os
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from lineage.db.database import Database
from lineage.services import walks
from lineage.services.demo import ANSWER_ID, load_incident
from lineage.settings import Settings
from lineage.store import PostgresStore


async def test_demo_walk_back_flags_both_root_causes(
    store: PostgresStore, database: Database, settings: Settings, owner: asyncpg.Connection
) -> None:
    await load_incident(store)
    await load_incident(store)  # a second run writes nothing
    assert await owner.fetchval("SELECT count(*) FROM provenance") == 11
    walk = await walks.walk_back(database, settings, "default", ANSWER_ID, None)
    depth = {node["context_id"]: node["depth"] for node in walk.nodes}
    assert depth["answer_1"] == 0 and depth["claim_1"] == 1 and depth["summary_1"] == 2
    assert depth["chunk_42"] == 3 and depth["doc_contractors_v1"] == 4
    assert "doc_contractors_v2" not in depth
    hops = await walks.suspicious_hops(database, settings, "default", ANSWER_ID, None)
    reasons = {(hop["context_id"], hop["reason"]) for hop in hops}
    assert reasons == {
        ("chunk_42", "old_transform_version"),
        ("chunk_42", "snapshot_predates_revision"),
        ("doc_contractors_v1", "source_changed"),
    }


def run_lineage(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LINEAGE_DATABASE_URL"}
    env |= {"LINEAGE_DATA_DIR": str(data_dir), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "lineage", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def lineage(data_dir: Path, *args: str) -> str:
    return run_lineage(data_dir, *args).stdout


def assert_machine_formats_parse(data_dir: Path) -> None:
    """Every machine format's stdout parses as a whole on the embedded default: diagnostics
    such as the embedded server's banner go to stderr."""
    from prov.model import ProvDocument

    def out(*args: str) -> str:
        return lineage(data_dir, *args)

    def ndjson(*args: str) -> list[dict[str, object]]:
        return [json.loads(line) for line in out(*args).splitlines()]

    assert json.loads(out("walk", ANSWER_ID, "--format", "json"))["nodes"]
    dot = out("walk", ANSWER_ID, "--format", "dot")
    assert dot.startswith("digraph lineage {") and dot.rstrip().endswith("}")
    assert ndjson("impact", "--source-uri", "s3://policies/contractors.md", "--format", "ndjson")
    assert "summary" in ndjson("freshness", "--format", "ndjson")[-1]
    assert json.loads(out("verify", ANSWER_ID, "--format", "json"))
    assert ndjson("report", "claims", "--format", "ndjson") is not None
    assert json.loads(out("export", "header", ANSWER_ID, "--format", "json"))
    exported = ProvDocument.deserialize(content=out("export", "prov", ANSWER_ID), format="json")
    assert exported.get_records()
    assert json.loads(out("verify-record", ANSWER_ID, "--format", "json"))["verified"]
    assert ndjson("sql", "run", "server_version")
    assert ndjson("audit", "list", "--tenant", "default") is not None
    assert out("log", "key").startswith("lineage")
    assert out("log", "checkpoint").startswith("lineage/default")


@pytest.mark.embedded
@pytest.mark.slow
def test_demo_on_the_embedded_server_from_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "lineage-data"
    try:
        demo = run_lineage(data_dir, "demo")
        assert "embedded PostgreSQL" in demo.stderr and str(data_dir) in demo.stderr
        assert "embedded PostgreSQL" not in demo.stdout
        first = demo.stdout
        for expected in (
            "old_transform_version",
            "chunker@1.4",
            "idx_2026_08_01",
            "snapshot_predates_revision",
            "source_changed",
            "lineage serve",
        ):
            assert expected in first, expected
        lineage(data_dir, "demo")
        lineage(data_dir, "stop")
        rows = lineage(
            data_dir,
            "sql",
            "run",
            "list_contexts",
            "-v",
            "tenant_id=default",
            "-v",
            "kind=any",
            "-v",
            "source_uri=any",
            "-v",
            "trace_id=any",
            "-v",
            "produced_by=any",
            "-v",
            "session_id=any",
            "-v",
            "since=-infinity",
            "-v",
            "until=infinity",
            "-v",
            "after_created_at=-infinity",
            "-v",
            "after_context_id=",
            "-v",
            "page_size=1000",
        )
        ids = [json.loads(line)["context_id"] for line in rows.splitlines()]
        assert len(ids) == len(set(ids)) == 13  # 11 records, a claim and a statement verdict
        version = lineage(data_dir, "sql", "run", "server_version")
        assert '"server_version_num": 18' in version
        assert_machine_formats_parse(data_dir)  # last: verify appends a verdict
    finally:
        lineage(data_dir, "stop")


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.slow
def test_serve_answers_over_http(database_url: str, tmp_path: Path) -> None:
    import time

    import httpx

    port = free_port()
    config = tmp_path / "lineage.env"
    config.write_text(
        f"LINEAGE_PORT={port}\nLINEAGE_DATABASE_URL={database_url}\n"
        f"LINEAGE_DATA_DIR={tmp_path / 'data'}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGE_")}
    server = subprocess.Popen(
        [sys.executable, "-m", "lineage", "serve", "--config", str(config)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        # It serves at once and is ready once it has migrated and connected.
        while True:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1)
                if ready.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, server.communicate()[0]
            assert time.monotonic() < deadline, "lineage serve was not ready in 30 s"
            time.sleep(0.2)
        assert ready.json()["status"] == "ready"
        record = {"kind": "document", "source_uri": "s3://served", "text": "served"}
        url = f"http://127.0.0.1:{port}/v1/contexts"
        # A server database: keys are on unless configured off.
        assert httpx.post(url, json=record).status_code == 401
        made = subprocess.run(
            [sys.executable, "-m", "lineage", "key", "create", "--tenant", "default",
             "--scope", "ingest", "--config", str(config)],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        key = made.stdout.strip().splitlines()[-1]
        created = httpx.post(url, json=record, headers={"Authorization": f"Bearer {key}"})
        assert created.status_code == 201
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=30)
    assert "serving on" in output
    assert "authentication: bearer keys" in output


def test_serve_builds_the_app_with_the_authentication_it_prints(database_url: str) -> None:
    """serve hands the app a resolved URL, so it decides keys or none itself: the embedded
    database on loopback serves without keys, as it says, and anything else with them."""
    from lineage.api.app import create_app
    from lineage.cli.server import serving_settings

    cases = [
        (Settings(database_url=None, auth=None), "127.0.0.1", "none"),
        (Settings(database_url=None, auth=None), "0.0.0.0", "keys"),
        (Settings(database_url=None, auth="keys"), "127.0.0.1", "keys"),
        (Settings(database_url=database_url, auth=None), "127.0.0.1", "keys"),
        (Settings(database_url=database_url, auth="none"), "0.0.0.0", "none"),
    ]
    for settings, host, expected in cases:
        app = create_app(serving_settings(settings, host), database_url=database_url)
        assert app.state.auth == expected, (settings.database_url, settings.auth, host)
