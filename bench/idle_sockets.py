"""Idle and half-sent sockets from one client address beside another address's requests: do
/healthz and a valid key's walk-back still answer 200 within 1 s?

    python -m bench.idle_sockets --sockets 20000 --bad 200

A fresh database holds the demo incident (lineage.services.demo, answer `answer_1`) and a read
key for tenant `default`; `lineage` runs in its own uvicorn process (bench.server.serving) with
keys on and the connection guard `lineage serve` uses (lineage.api.connections: header deadline
LINEAGE_HEADER_READ_TIMEOUT_S, LINEAGE_MAX_CONNECTIONS_PER_ADDRESS), at their defaults: the app
factory `serving` starts does not call `guard_connections`, so LINEAGE_* values for those two
would not reach it. `--unguarded` serves with uvicorn's own httptools protocol instead.

From 127.0.0.1: `--bad` requests with `Authorization: Bearer nonsense` (the bad-request cap for
that address fills), then `--sockets` TCP connections opened as fast as the attacker can, one in
ten sending half its request headers, the rest nothing, all kept open by the attacker. The
attacker is separate processes (each raises its RLIMIT_NOFILE soft limit to the hard limit and
holds at most that many sockets, less a margin), so neither its descriptors nor its event loop
are the timed client's. From 127.0.0.2, as the attack starts: `--timed` /healthz and as many
walk-backs (`GET /v1/contexts/answer_1/lineage`), alternately, each on a new connection as a
probe makes it (`--keep-alive`: all on one, opened as the attack starts), spread evenly over
`--hold` seconds (past the header deadline), each timed with httpx; then the attacker lets go.
The same requests at the same pace before the attack are the reference. Sampled throughout: the
server process's open descriptors (/proc/PID/fd). Each attacker socket's fate is read from the
attacker's side (closed by the server at once: the address cap; after about the header deadline:
the deadline) and checked against the server's lineage_connections_closed counter.
"""

import argparse
import asyncio
import errno
import json
import math
import multiprocessing
import multiprocessing.synchronize
import os
import resource
import secrets
import socket
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass
from multiprocessing.queues import Queue
from typing import Any

import httpx

from bench.database import drop, recreate
from bench.figures import percentile
from bench.server import Server, serving
from lineage.db.database import Database
from lineage.db.distribute import distribute
from lineage.db.migrate import migrate
from lineage.services import auth
from lineage.services.demo import ANSWER_ID, load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.citus_cluster import citus_cluster

ATTACKER = "127.0.0.1"
OTHER = "127.0.0.2"  # Linux routes all of 127/8 to loopback
TENANT = "default"
HALF_EVERY = 10  # every tenth attacker socket sends half its request headers
HALF_HEADERS = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow"
CONNECTING_AT_ONCE = 1000  # connects in flight per attacker process
CONNECT_TIMEOUT_S = 30.0
FD_MARGIN = 100  # descriptors an attacker process keeps for itself (loop, pipes, imports)
DEADLINE_S = 1.0  # "200 within 1 s"
REQUEST_TIMEOUT_S = 5.0  # a timed request given up on (past DEADLINE_S it has failed anyway)
GUARDED = "--http lineage.api.connections:GuardedHttpToolsProtocol"
HEADER_TIMEOUT_S: float = Settings.model_fields["header_read_timeout_s"].default
PER_ADDRESS: int = Settings.model_fields["max_connections_per_address"].default


def raise_nofile() -> dict[str, int]:
    """This process's RLIMIT_NOFILE soft limit raised to its hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    now = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return {"soft_before": soft, "hard": hard, "soft_now": now}


@dataclass
class Probe:
    """One attacker socket: when it connected (or why not) and when and how the server ended it,
    on the monotonic clock (system-wide on Linux, so comparable across processes)."""

    half: bool
    connect_started: float = math.nan
    connected: float = math.nan
    connect_error: str | None = None
    ended: float = math.nan
    how: str | None = None  # fin, reset, answered (the server sent bytes)

    def row(self) -> tuple[Any, ...]:
        return (
            self.half, self.connect_started, self.connected, self.connect_error, self.ended,
            self.how,
        )  # fmt: skip


async def hold_socket(
    port: int, probe: Probe, connecting: asyncio.Semaphore, sockets: list[socket.socket]
) -> None:
    loop = asyncio.get_running_loop()
    async with connecting:
        probe.connect_started = time.monotonic()
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        except OSError as exc:
            probe.connect_error = errno.errorcode.get(exc.errno or 0, str(exc))
            return
        sockets.append(sock)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(loop.sock_connect(sock, ("127.0.0.1", port)), CONNECT_TIMEOUT_S)
        except TimeoutError:
            probe.connect_error = "timeout"
            return
        except OSError as exc:
            probe.connect_error = errno.errorcode.get(exc.errno or 0, str(exc))
            return
        probe.connected = time.monotonic()
    try:
        if probe.half:
            await loop.sock_sendall(sock, HALF_HEADERS)
        data = await loop.sock_recv(sock, 1)
        probe.how = "answered" if data else "fin"
    except OSError:
        probe.how = "reset"
    probe.ended = time.monotonic()


async def attack(
    port: int, count: int, first: int, ready: "Queue[Any]", go: multiprocessing.synchronize.Event,
    release: multiprocessing.synchronize.Event,
) -> list[tuple[Any, ...]]:  # fmt: skip
    ready.put(("ready", raise_nofile()))
    await asyncio.to_thread(go.wait)
    connecting = asyncio.Semaphore(CONNECTING_AT_ONCE)
    probes = [Probe(half=(first + n) % HALF_EVERY == HALF_EVERY - 1) for n in range(count)]
    sockets: list[socket.socket] = []
    tasks = [asyncio.create_task(hold_socket(port, probe, connecting, sockets)) for probe in probes]
    await asyncio.to_thread(release.wait)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for sock in sockets:
        sock.close()
    return [probe.row() for probe in probes]


def attacker(
    port: int, count: int, first: int, ready: "Queue[Any]", go: multiprocessing.synchronize.Event,
    release: multiprocessing.synchronize.Event,
) -> None:  # fmt: skip
    """One attacker process (spawned): `count` sockets held until `release`."""
    ready.put(("done", asyncio.run(attack(port, count, first, ready, go, release))))


class FdSampler(threading.Thread):
    """The server process's open descriptors, sampled until stopped: the peak and when."""

    def __init__(self, pid: int, since: float, every_s: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.path = f"/proc/{pid}/fd"
        self.since = since
        self.every_s = every_s
        self.stopped = threading.Event()
        self.peak = 0
        self.peak_at = math.nan
        self.last = 0

    def count(self) -> int:
        try:
            return len(os.listdir(self.path))
        except OSError:
            return -1

    def run(self) -> None:
        while not self.stopped.is_set():
            self.last = self.count()
            if self.last > self.peak:
                self.peak, self.peak_at = self.last, time.monotonic() - self.since
            self.stopped.wait(self.every_s)


@dataclass(frozen=True)
class Options:
    sockets: int = 20_000
    bad: int = 200
    timed: int = 50  # /healthz and walk-backs, each
    hold_s: float = 15.0
    guarded: bool = True
    keep_alive: bool = False  # one connection for every timed request, else one each

    @property
    def pace_s(self) -> float:
        return self.hold_s / (2 * self.timed)


async def timed_requests(
    server: Server, token: str, options: Options, since: float, count: int | None = None
) -> list[dict[str, Any]]:
    """/healthz and walk-backs from OTHER, alternately, one every `options.pace_s`; each on a
    connection of its own unless `options.keep_alive` (a probe connects anew)."""
    transport = httpx.AsyncHTTPTransport(
        local_address=OTHER,
        limits=httpx.Limits(max_keepalive_connections=None if options.keep_alive else 0),
    )
    timings: list[dict[str, Any]] = []
    async with httpx.AsyncClient(
        transport=transport, base_url=server.base_url, timeout=REQUEST_TIMEOUT_S
    ) as client:
        for number in range(2 * (options.timed if count is None else count)):
            healthz = number % 2 == 0
            path = "/healthz" if healthz else f"/v1/contexts/{ANSWER_ID}/lineage"
            headers = {} if healthz else {"authorization": f"Bearer {token}"}
            if not options.keep_alive:
                headers["connection"] = "close"
            started = time.monotonic()
            try:
                status: int | str = (await client.get(path, headers=headers)).status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            took = time.monotonic() - started
            timings.append(
                {"what": "healthz" if healthz else "walk_back", "at_s": started - since,
                 "ms": took * 1000, "status": status}
            )  # fmt: skip
            await asyncio.sleep(max(0.0, options.pace_s - took))
    return timings


async def bad_requests(server: Server, count: int) -> dict[str, Any]:
    """`count` anonymous requests with a nonsense key from ATTACKER, then /healthz from there."""
    statuses: Counter[int | str] = Counter()
    transport = httpx.AsyncHTTPTransport(local_address=ATTACKER)
    nonsense = {"authorization": "Bearer nonsense"}
    async with httpx.AsyncClient(
        transport=transport, base_url=server.base_url, timeout=10.0
    ) as client:
        for _ in range(count):
            try:
                response = await client.get(f"/v1/contexts/{ANSWER_ID}/lineage", headers=nonsense)
                statuses[response.status_code] += 1
            except httpx.HTTPError as exc:
                statuses[type(exc).__name__] += 1
        healthz = (await client.get("/healthz")).status_code
    return {"statuses": dict(statuses), "healthz_from_same_address_after": healthz}


def latency(timings: list[dict[str, Any]], what: str) -> dict[str, Any]:
    chosen = [t for t in timings if t["what"] == what]
    ms = [t["ms"] for t in chosen]
    limit_ms = DEADLINE_S * 1000
    answered = [t for t in chosen if t["status"] == 200]
    return {
        "requests": len(chosen),
        "statuses": dict(Counter(str(t["status"]) for t in chosen)),
        "p50_ms": round(percentile(ms, 0.5), 1),
        "p95_ms": round(percentile(ms, 0.95), 1),
        "max_ms": round(max(ms), 1),
        "max_at_s": round(max(chosen, key=lambda t: t["ms"])["at_s"], 2),
        "max_of_200s_ms": round(max((t["ms"] for t in answered), default=math.nan), 1),
        "failures_at_s": [round(t["at_s"], 2) for t in chosen if t["status"] != 200],
        "all_200_within_1s": all(t["status"] == 200 and t["ms"] < limit_ms for t in chosen),
    }


def spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "min": round(min(values), 3),
        "p50": round(percentile(values, 0.5), 3),
        "max": round(max(values), 3),
    }


def fates(rows: list[tuple[Any, ...]], since: float, released: float) -> dict[str, Any]:
    """What became of the attacker's sockets, seen from the attacker."""
    connected = [r for r in rows if r[3] is None and not math.isnan(r[2])]
    failed = Counter(str(r[3]) for r in rows if r[3] is not None)
    ended = [r for r in connected if r[5] is not None]
    # The guard aborts a capped connection as soon as it accepts it and closes a silent one at
    # the header deadline: a socket ended within half the deadline was refused by the cap.
    quick = [r for r in ended if r[4] - r[2] < HEADER_TIMEOUT_S / 2]
    late = [r for r in ended if r[4] - r[2] >= HEADER_TIMEOUT_S / 2]
    return {
        "attempted": len(rows),
        "connected": len(connected),
        "connect_failed": dict(failed),
        "opening_took_s": round(max((r[2] for r in connected), default=since) - since, 2),
        "connect_s": spread([r[2] - r[1] for r in connected]),
        "ended_by_server_at_once": len(quick),
        "ended_at_once_how": dict(Counter(r[5] for r in quick)),
        "ended_at_once_after_connect_s": spread([r[4] - r[2] for r in quick]),
        "ended_by_server_later": len(late),
        "ended_later_how": dict(Counter(r[5] for r in late)),
        "ended_later_after_connect_s": spread([r[4] - r[2] for r in late]),
        "ended_later_half_headers": sum(1 for r in late if r[0]),
        "still_open_when_released": len(connected) - len(ended),
        "released_after_s": round(released - since, 2),
    }


def closed_counter(exposition: str) -> dict[str, float]:
    """lineage_connections_closed_total by reason, from /metrics."""
    counts: dict[str, float] = {}
    for line in exposition.splitlines():
        if line.startswith("lineage_connections_closed_total{"):
            labels, _, value = line.rpartition(" ")
            counts[labels.split('reason="', 1)[1].split('"', 1)[0]] = float(value)
    return counts


def open_files_limit(pid: int) -> str:
    with open(f"/proc/{pid}/limits") as limits:
        for line in limits:
            if line.startswith("Max open files"):
                return " / ".join(line.split()[3:5])  # soft / hard
    return "unknown"


async def measure(url: str, token: str, options: Options) -> dict[str, Any]:
    metrics_token = secrets.token_hex(16)
    env = {"LINEAGE_AUTH": "keys", "LINEAGE_LOG_LEVEL": "warning", "LINEAGE_LOG_INTERVAL_S": "0",
           "LINEAGE_METRICS_TOKEN": metrics_token}  # fmt: skip
    before = os.environ.get("BENCH_UVICORN")
    if options.guarded:  # serving reads it from this process's environment
        os.environ["BENCH_UVICORN"] = f"{before or ''} {GUARDED}".strip()
    try:
        with serving(url, env) as server:
            return await attacked(server, token, options, metrics_token)
    finally:
        if before is None:
            os.environ.pop("BENCH_UVICORN", None)
        else:
            os.environ["BENCH_UVICORN"] = before


async def attacked(
    server: Server, token: str, options: Options, metrics_token: str
) -> dict[str, Any]:
    pid = server.process.pid
    guarded = options.guarded
    await timed_requests(server, token, options, time.monotonic(), 5)  # warm: pool, plans
    reference = await timed_requests(server, token, options, time.monotonic())
    fds_idle = len(os.listdir(f"/proc/{pid}/fd"))
    bad_answered = await bad_requests(server, options.bad)

    # The attacker: processes of at most (hard limit - margin) sockets each, spawned and ready
    # (limits raised, loop running) before the clock starts.
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    processes = max(1, math.ceil(options.sockets / (hard - FD_MARGIN)))
    share, rest = divmod(options.sockets, processes)
    shares = [share + (1 if n < rest else 0) for n in range(processes)]
    context = multiprocessing.get_context("spawn")
    ready: Queue[Any] = context.Queue()
    go, release = context.Event(), context.Event()
    workers = [
        context.Process(
            target=attacker, args=(server.port, share, sum(shares[:n]), ready, go, release)
        )
        for n, share in enumerate(shares)
    ]
    for worker in workers:
        worker.start()
    limits = [(await asyncio.to_thread(ready.get, True, 60))[1] for _ in workers]

    since = time.monotonic()
    sampler = FdSampler(pid, since)
    sampler.start()
    go.set()
    under_attack = await timed_requests(server, token, options, since)
    released = time.monotonic()
    release.set()
    rows: list[tuple[Any, ...]] = []
    for _ in workers:
        kind, got = await asyncio.to_thread(ready.get, True, 120)
        assert kind == "done", kind
        rows += got
    for worker in workers:
        worker.join(30)
    await asyncio.sleep(0.5)
    sampler.stopped.set()
    sampler.join()
    fds_after = sampler.count()

    async with httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(local_address=OTHER), base_url=server.base_url
    ) as client:
        scraped = await client.get("/metrics", headers={"authorization": f"Bearer {metrics_token}"})
    ok = scraped.status_code == 200
    closed = closed_counter(scraped.text) if ok else f"/metrics answered {scraped.status_code}"
    kinds = ("healthz", "walk_back")
    held = {what: latency(under_attack, what) for what in kinds}
    return {
        "server": {
            "protocol": "guarded (lineage.api.connections)" if guarded else "uvicorn's httptools",
            "header_read_timeout_s": HEADER_TIMEOUT_S if guarded else None,
            "max_connections_per_address": PER_ADDRESS if guarded else None,
            "open_files_limit_soft_hard": open_files_limit(pid),
            "exit_code": server.process.poll(),
        },
        "attacker": {
            "processes": processes,
            "sockets_per_process": shares,
            "rlimit_nofile": limits,
            "half_header_sockets": sum(1 for r in rows if r[0]),
        },
        "bad_requests_before_the_sockets": bad_answered,
        "attacker_sockets": fates(rows, since, released),
        "server_closed_counter": closed,
        "server_fds": {
            "idle": fds_idle,
            "peak": sampler.peak,
            "peak_at_s": round(sampler.peak_at, 2),
            "after_release": fds_after,
        },
        "reference_no_attack": {what: latency(reference, what) for what in kinds},
        "under_attack_from_127_0_0_2": held,
        "done_when_held": all(figures["all_200_within_1s"] for figures in held.values()),
    }


async def measure_on(url: str, options: Options) -> dict[str, Any]:
    """Load the demo incident into the migrated database at `url`, then measure."""
    database = await Database.connect(Settings(), url)
    try:
        await load_incident(PostgresStore(database, TENANT))
        token = (await auth.create_key(database, TENANT, "read"))[0]
    finally:
        await database.close()
    load_start = os.getloadavg()
    figures = await measure(url, token, options)
    return {
        **asdict(options),
        "pace_s": options.pace_s,
        "load_average_start": [round(value, 2) for value in load_start],
        "load_average_end": [round(value, 2) for value in os.getloadavg()],
        **figures,
    }


async def run(server_url: str, options: Options) -> dict[str, Any]:
    dbname = "lineage_bench_idle_sockets"
    url = await recreate(server_url, dbname)
    try:
        return await measure_on(url, options)
    finally:
        await drop(server_url, dbname)


async def run_on_citus(options: Options) -> dict[str, Any]:
    """The same with the database on a private Citus cluster (tests/citus_cluster.py)."""
    with citus_cluster() as cluster:
        url = cluster.create_database("lineage_bench_idle_sockets")
        migrate(url)
        distribute(url)
        return await measure_on(url, options)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--sockets", type=int, default=20_000, help="attacker sockets held open")
    parser.add_argument("--bad", type=int, default=200, help="requests with a nonsense key")
    parser.add_argument("--timed", type=int, default=50, help="/healthz and walk-backs, each")
    parser.add_argument(
        "--hold", type=float, default=15.0, help="seconds the sockets are held; timed requests "
        "are spread over them (past the header deadline)",
    )  # fmt: skip
    parser.add_argument(
        "--unguarded", action="store_true", help="serve with uvicorn's own httptools protocol"
    )
    parser.add_argument(
        "--keep-alive", action="store_true", help="one connection for all timed requests"
    )
    parser.add_argument("--citus", action="store_true", help="on a private Citus cluster")
    arguments = parser.parse_args()
    chosen = Options(
        sockets=arguments.sockets, bad=arguments.bad, timed=arguments.timed,
        hold_s=arguments.hold, guarded=not arguments.unguarded, keep_alive=arguments.keep_alive,
    )  # fmt: skip
    if arguments.citus:
        summary = asyncio.run(run_on_citus(chosen))
    else:
        summary = asyncio.run(run(arguments.server_url, chosen))
    print(json.dumps(summary, indent=2))
    print(
        "200 within 1 s for every request from 127.0.0.2: "
        + ("held" if summary["done_when_held"] else "did NOT hold")
    )
