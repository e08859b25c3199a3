"""The service as users run it: uvicorn in its own process on loopback, and a lean HTTP/1.1
keep-alive client, so that at thousands of requests a second the client is not what is timed."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from lineage.api.connections import PROTOCOL


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    headers: dict[str, str]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def peak_rss_bytes(self) -> int:
        """The server process's high-water resident memory so far (Linux VmHWM)."""
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmHWM in /proc status")

    def rss_bytes(self) -> int:
        with open(f"/proc/{self.process.pid}/statm") as statm:
            return int(statm.read().split()[1]) * 4096


@contextmanager
def serving(
    database_url: str, env: dict[str, str] | None = None, api_key: str | None = None
) -> Iterator[Server]:
    """uvicorn serving the app on a free loopback port until the block ends."""
    port = free_port()
    command = [
        sys.executable, "-m", "uvicorn", "--factory", "lineage.api.app:create_app",
        "--host", "127.0.0.1", "--port", str(port), "--no-access-log", "--log-level", "warning",
        "--http", PROTOCOL,  # as lineage serve: the header deadline and per-address cap
        # uvicorn puts --app-dir (default: the working directory) first on the path: an env's
        # PYTHONPATH (an earlier checkout timed beside this one) must be it to be what is served.
        "--app-dir", (env or {}).get("PYTHONPATH", ""),
        # BENCH_UVICORN="--loop asyncio --http h11" measures the pure-Python event loop and parser
        *os.environ.get("BENCH_UVICORN", "").split(),
    ]  # fmt: skip
    environment = os.environ | {"LINEAGE_DATABASE_URL": database_url} | (env or {})
    started = time.perf_counter()
    process = subprocess.Popen(command, env=environment)
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    server = Server(process, port, headers)
    try:
        while time.perf_counter() - started < 60:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited with {process.returncode} at start-up")
            try:
                if httpx.get(f"{server.base_url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        else:
            raise RuntimeError("the server was not ready within 60 s")
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Connection:
    """One keep-alive HTTP/1.1 connection; responses must carry Content-Length."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> "Connection":
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        status, _, content = await self.exchange(method, path, body, headers)
        return status, content

    async def exchange(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """One request: the status, the response's headers (lower-case names) and body."""
        payload = b"" if body is None else json.dumps(body).encode()
        lines = [f"{method} {path} HTTP/1.1", "host: 127.0.0.1", f"content-length: {len(payload)}"]
        if body is not None:
            lines.append("content-type: application/json")
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
        answered = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in header_lines)
        }
        length = int(answered.get("content-length", "0"))
        return int(status_line.split()[1]), answered, await self.reader.readexactly(length)

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()
