"""The demo incident: its walk-back names the stale chunker and snapshot and the changed source."""

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import httpx
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


# A command the demo suggests: `lineage`, a verb, and its arguments (ids, no options).
SUGGESTED = re.compile(r"\blineage [a-z][a-z-]*(?: [a-z][a-z0-9_]*)*")


def block_after(output: str, heading: str) -> list[str]:
    """The lines after the first line holding `heading`, up to the next blank line."""
    lines = [line.rstrip() for line in output.splitlines()]
    start = next(i for i, line in enumerate(lines) if heading in line) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i]), len(lines))
    return lines[start:end]


def lines_of(output: str) -> list[str]:
    return [line.rstrip() for line in output.splitlines() if line.strip()]


@contextmanager
def serving_command(args: list[str], env: dict[str, str], url: str) -> Iterator[None]:
    server = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, server.communicate()[0]
            assert time.monotonic() < deadline, f"{' '.join(args)} was not ready in 30 s"
            time.sleep(0.2)
        yield
    finally:
        server.terminate()
        server.communicate(timeout=30)


@pytest.mark.slow
def test_every_command_the_demo_suggests_shows_what_the_demo_showed(
    database_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGE_")}
    # As on the embedded default the demo is written for: no keys on the loopback address.
    env |= {"LINEAGE_DATABASE_URL": database_url, "LINEAGE_DATA_DIR": str(tmp_path / "data"),
            "LINEAGE_PORT": str(port), "LINEAGE_AUTH": "none", "COLUMNS": "200"}  # fmt: skip

    def lineage_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lineage", *args],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    demo = lineage_cli("demo")
    assert demo.returncode == 0, demo.stderr
    shown = demo.stdout
    suggested = list(dict.fromkeys(SUGGESTED.findall(shown)))  # in the order shown
    verbs = {command.split()[1] for command in suggested}
    assert verbs == {"walk", "verify", "freshness", "serve"}, suggested
    after_walk = lines_of(shown.partition("The walk back")[2])[1:]
    walked = after_walk[: next(i for i, x in enumerate(after_walk) if "suspicious hops" in x) + 1]
    for command in suggested:
        if command == "lineage serve":
            serve_shows_the_walk(shown, walked, env)
            continue
        done = lineage_cli(*command.split()[1:])
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        if command.startswith("lineage walk "):
            assert lines_of(done.stdout) == walked, command
        elif command.startswith("lineage verify "):
            judged = block_after(shown, f"({command})")
            assert judged, shown
            assert lines_of(done.stdout) == judged, command
        elif command == "lineage freshness":
            listed = block_after(shown, f"`{command}`")
            found = listed[: next(i for i, line in enumerate(listed) if len(line.split()) != 2)]
            count = re.search(r"finds (\d+) records", shown)
            assert count and len(found) == int(count[1]), shown
            assert f"{count[1]} records" in done.stdout, done.stdout
            rows = {tuple(line.split()[1:3]) for line in lines_of(done.stdout)[2:-1]}
            assert rows == {tuple(line.split()) for line in found}, done.stdout
        else:
            pytest.fail(f"the demo suggests {command}: add what it must show")


def serve_shows_the_walk(shown: str, walked: list[str], env: dict[str, str]) -> None:
    """`lineage serve`, then the printed /ui: the page, the API docs and the same walk back."""
    ui = re.search(r"open (http://\S+/ui),\s+paste\s+(\w+)", shown)
    assert ui, shown
    base = ui[1].removesuffix("/ui")
    assert base == f"http://127.0.0.1:{env['LINEAGE_PORT']}"
    with serving_command([sys.executable, "-m", "lineage", "serve"], env, base):
        assert httpx.get(ui[1], timeout=10).status_code == 200
        assert httpx.get(f"{base}/docs", timeout=10).status_code == 200
        walk = httpx.get(f"{base}/v1/contexts/{ui[2]}/lineage", timeout=10).json()
    ids = {node["context_id"] for node in walk["nodes"]}
    tree = re.findall(r"^[│ ]*(?:[├└]── )?[a-z_]+ (\w+)  ", "\n".join(walked), re.M)
    assert ids == set(tree), walk
