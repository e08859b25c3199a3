"""schemathesis with every check on (`--checks all`), as its CLI runs it, against a real server
with keys on and the demo incident loaded: coverage, fuzzing and stateful phases, a bounded
number of examples per operation. No failure is allowed; tests/schemathesis.toml lists each
exception and says why the schema is right there."""

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.server import Server, serving
from lineage.services import auth
from lineage.services.demo import load_incident
from lineage.store.postgres import PostgresStore
from tests.conftest import database_at

pytestmark = pytest.mark.slow

CONFIG = Path(__file__).with_name("schemathesis.toml")
# Enough to find what the checks find here (each run of 10 and 30 found the same), well
# under three minutes on two shared cores.
EXAMPLES_PER_OPERATION = 10


@pytest.fixture
def keyed_server(database_url: str, tmp_path: Path) -> Iterator[tuple[Server, str]]:
    async def demo() -> str:
        async with database_at(database_url) as database:
            await load_incident(PostgresStore(database))
            token, _ = await auth.create_key(database, "default", "admin")
            return token

    token = asyncio.run(demo())
    env = {
        "LINEAGE_AUTH": "keys",
        "LINEAGE_LOG_INTERVAL_S": "0",
        "LINEAGE_LOG_LEVEL": "error",
        # A fuzzer sends bad requests on purpose, and many at once: neither may be refused.
        "LINEAGE_BAD_REQUEST_LIMIT": "1000000",
        "LINEAGE_MAX_CONCURRENT_REQUESTS": "0",
        # /metrics then asks for its own token: 401 without it, as its schema says.
        "LINEAGE_METRICS_TOKEN": "fuzz-metrics-token",
        # The log's witness beside a key of this test's own (a database name comes back).
        "LINEAGE_LOG_SIGNING_KEY_FILE": str(tmp_path / "log-signing-key.pem"),
    }
    with serving(database_url, env) as running:
        yield running, token


def test_schemathesis_with_every_check_finds_nothing(
    keyed_server: tuple[Server, str], tmp_path: Path
) -> None:
    server, token = keyed_server
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file", str(CONFIG),
        "run", f"{server.base_url}/openapi.json",
        "--checks", "all",
        "--header", f"Authorization: Bearer {token}",
        "--max-examples", str(EXAMPLES_PER_OPERATION),
        "--generation-deterministic",
        # The live event stream never ends by itself; tests/test_events.py covers it.
        "--exclude-path", "/v1/events",
        "--request-timeout", "30",
        # One worker: with two threads, hypothesis's own lambda parsing raced (an "AST
        # constructor recursion depth mismatch" error, about one run in twenty).
        "--workers", "1",
        "--no-color",
        "--report-dir", str(tmp_path),
    ]  # fmt: skip
    ran = subprocess.run(  # in tmp_path: the CLI keeps a cache folder where it runs
        command, capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path
    )
    found = [ran.stdout.find(f"=== {part}") for part in ("ERRORS", "FAILURES", "WARNINGS")]
    report = ran.stdout[min([at for at in found if at >= 0], default=0) :]
    assert ran.returncode == 0, report[:10_000] + ran.stderr[-2000:]
    assert "Tested: " in ran.stdout and "failures" not in ran.stdout.splitlines()[-1]
