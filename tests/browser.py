"""What the browser tests share: Debian's chromium, where screenshots go, `lineage serve` on a
loopback port, and a page that may reach nothing but that server."""

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.async_api import Page, Route, async_playwright, expect

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
# Two cores shared with a test suite: an expectation waits up to this long (ms), not 5 s.
expect.set_options(timeout=20_000)


@pytest.fixture
def chromium() -> str:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium")
        pytest.skip(f"no {CHROMIUM}: apt-get install -y chromium")
    return str(CHROMIUM)


@pytest.fixture
def artifacts() -> Path:
    """Where screenshots and downloads go: $LINEAGE_UI_ARTIFACTS, else test-artifacts/."""
    folder = Path(os.environ.get("LINEAGE_UI_ARTIFACTS") or ROOT / "test-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def wait_until_ready(base: str, server: subprocess.Popen[str]) -> None:
    """It serves at once and is ready once it has migrated and connected (/readyz 200)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert server.poll() is None, "lineage serve exited before it was ready"
        assert time.monotonic() < deadline, "lineage serve was not ready in 60 s"
        time.sleep(0.2)


@contextmanager
def lineage_serve(
    database_url: str, folder: Path, auth: str = "keys", settings: dict[str, str] | None = None
) -> Iterator[str]:
    """`lineage serve` on a free loopback port, with `settings` (LINEAGE_* lines) besides its
    port, database and auth; yields the explorer URL it prints."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = folder / "lineage.env"
    config.write_text(
        f"LINEAGE_PORT={port}\nLINEAGE_DATABASE_URL={database_url}\nLINEAGE_AUTH={auth}\n"
        + "".join(f"{name}={value}\n" for name, value in (settings or {}).items())
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINEAGE_")}
    server = subprocess.Popen(
        [sys.executable, "-m", "lineage", "serve", "--config", str(config)],
        env=env | {"COLUMNS": "200", "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert server.stdout is not None
        printed = []
        for line in server.stdout:  # until it prints the explorer's address
            printed.append(line)
            if "/ui" in line:
                break
        urls = re.findall(r"http://\S+/ui\b", "".join(printed))
        assert urls, f"lineage serve printed no explorer URL:\n{''.join(printed)}"
        wait_until_ready(urls[0].removesuffix("/ui"), server)
        yield urls[0]
    finally:
        server.terminate()
        server.communicate(timeout=30)


@asynccontextmanager
async def offline_page(
    chromium: str, url: str, errors: list[str], width: int = 1400, height: int = 950
) -> AsyncIterator[Page]:
    """A page whose every request to anywhere but the server at `url` fails, as with no
    network; page errors and refused requests land in `errors`."""
    server = urlsplit(url).netloc

    async def only_the_server(route: Route) -> None:
        if urlsplit(route.request.url).netloc == server:
            await route.continue_()
        else:
            errors.append(f"blocked {route.request.resource_type} {route.request.url}")
            await route.abort("internetdisconnected")

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium)
        page = await browser.new_page(viewport={"width": width, "height": height})
        page.set_default_timeout(20_000)
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.route("**/*", only_the_server)
        try:
            yield page
        finally:
            await browser.close()
