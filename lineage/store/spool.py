"""Degrade-open recording: when the store fails, the pipeline goes on and its records wait.

Wrap any store, then derive() as usual::

    store = SpoolingStore(PostgresStore(database)) # or SpoolingStore(HttpStore(url, api_key=...))
    doc = await derive(store, [], text, "document", source_uri="s3://policy.md")

- Validation errors (InvalidRecord, Conflict, and BodyTooLarge for a batch larger than the API
  takes) still raise: they are the caller's bugs, and no retry would fix them. They raise while
  the store is down too.
- A key the API refuses (bad, revoked, or without the ingest scope: Unauthorized, Forbidden) is
  an operator's to fix, not the pipeline's: the batch is spooled, counted as
  `credentials_refused` and logged as an error with the reason, and replays once the key is
  fixed. `SpoolingStore(..., strict=True)` raises it instead.
- Any other failure of the store (database or API down, timeout, network error, 5xx, 429) never
  reaches the caller. It is logged with the records' trace ids and counted, and the batch is
  appended to a local spool: JSON lines, one file per tenant (`<data_dir>/spool/<tenant>.jsonl`),
  fsync'd before derive() returns.
- While anything waits in the spool, new records queue behind it, since their parents may be
  among the waiting ones: records reach the store in the order they were derived.
- The spool drains oldest first: on the next append once the retry backoff has passed, from a
  background retry with exponential backoff, or with `lineage spool replay`. Replaying a record
  the store already holds is a no-op (created=False), so a batch that committed just before the
  connection broke is not stored twice.
- What derive() returns for a spooled record: a usable Context (its id, text and parents, to pass
  downstream) with `spooled=True`. Its `record` carries the time it was spooled; the stored
  record will carry the time of its replay. At the Store level: `Appended(record,
  created=False, spooled=True)`.
- A spooled batch that the store refuses on replay (a parent that never existed, an id stored
  with other content) has no caller left to raise to: it moves to `<tenant>.jsonl.rejected` with
  the reason, and is logged and counted; `lineage spool status` shows it.
- Spooled records cannot be read back (`get`) until they are replayed.
- Processes sharing a spool folder take turns through a lock file beside each spool.
"""

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from lineage.core import metrics
from lineage.core.errors import (
    BadParameter,
    BodyTooLarge,
    Conflict,
    Forbidden,
    InvalidRecord,
    Unauthorized,
)
from lineage.core.progress import Progress, unwatched
from lineage.core.queries import QueryIn
from lineage.core.record import ContextRecord, NewContext, check_batch, check_id
from lineage.core.store import Appended, Store
from lineage.settings import Settings

log = logging.getLogger(__name__)

# What the store refuses for the records themselves: raised to the caller, never retried.
REFUSED_RECORDS = (InvalidRecord, Conflict, BodyTooLarge)

# Records per store append when draining: few round trips, bodies far below the API's limits.
REPLAY_GROUP_RECORDS = 500
SPOOL_SUFFIX = ".jsonl"
# Records waiting in each spool file this process uses; the gauge shows their sum.
_depths: dict[Path, int] = {}


def spool_dir(settings: Settings) -> Path:
    return settings.data_dir / "spool"


@dataclass(frozen=True)
class SpooledBatch:
    """One append the store could not take; on replay all of it is stored, or none."""

    spooled_at: datetime
    records: list[NewContext]

    def line(self) -> bytes:
        fields = {
            "spooled_at": self.spooled_at.isoformat(),
            "records": [record.model_dump(mode="json") for record in self.records],
        }
        return json.dumps(fields, separators=(",", ":")).encode() + b"\n"

    @classmethod
    def parse(cls, line: bytes) -> "SpooledBatch":
        fields = json.loads(line)
        return cls(
            datetime.fromisoformat(fields["spooled_at"]),
            [NewContext.model_validate(record) for record in fields["records"]],
        )


@dataclass(frozen=True)
class Replay:
    replayed: int  # records the store took (new, or already there)
    rejected: int  # records the store refused, moved to the rejected file
    remaining: int  # records still waiting because the store failed again
    error: str | None  # that failure


@dataclass(frozen=True)
class SpoolStatus:
    tenant_id: str
    batches: int
    records: int
    oldest: datetime | None
    rejected_batches: int


def _sync_directory(directory: Path) -> None:
    """Make a created, renamed or removed file name durable, not only the file's bytes."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _drop_torn_tail(handle: BinaryIO) -> None:
    """A crash mid-write leaves a line without its newline, never acknowledged to anyone:
    cut it off, or the next line would be glued to it."""
    size = handle.seek(0, os.SEEK_END)
    if size and os.pread(handle.fileno(), 1, size - 1) != b"\n":
        handle.seek(0)
        handle.truncate(handle.read().rfind(b"\n") + 1)


def _private(path: Path, flags: int) -> int:
    """A descriptor on a file only its owner can read: records name sources and traces."""
    return os.open(path, flags | os.O_CREAT, 0o600)


def _append_line(path: Path, line: bytes) -> None:
    created = not path.exists()
    with open(_private(path, os.O_RDWR | os.O_APPEND), "a+b") as handle:
        _drop_torn_tail(handle)
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())
    if created:
        _sync_directory(path.parent)


class SpoolFile:
    """One tenant's spool: an append-only file of JSON lines, each fsync'd as it is added."""

    def __init__(self, directory: Path, tenant_id: str) -> None:
        check_id(tenant_id, "tenant_id")  # the id names the file
        self.tenant_id = tenant_id
        self.directory = directory
        self.path = directory / f"{tenant_id}{SPOOL_SUFFIX}"
        self.rejected_path = directory / f"{tenant_id}{SPOOL_SUFFIX}.rejected"
        self._lock_path = directory / f"{tenant_id}{SPOOL_SUFFIX}.lock"

    def prepare(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_path.touch()

    def waiting(self) -> bool:
        try:
            return self.path.stat().st_size > 0
        except FileNotFoundError:
            return False

    @contextlib.asynccontextmanager
    async def locked(self) -> AsyncIterator[None]:
        """Exclusive across processes; polled, so that the event loop never blocks on it."""
        with self._lock_path.open("a") as handle:
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    await asyncio.sleep(0.01)
            yield  # closing the file releases the lock

    def add(self, *batches: SpooledBatch) -> None:
        """Durable when this returns. Hold `locked()`."""
        _append_line(self.path, b"".join(batch.line() for batch in batches))

    def batches(self) -> list[SpooledBatch]:
        try:
            content = self.path.read_bytes()
        except FileNotFoundError:
            return []
        complete = content[: content.rfind(b"\n") + 1]  # without a torn last line
        return [SpooledBatch.parse(line) for line in complete.splitlines()]

    def keep(self, batches: Sequence[SpooledBatch]) -> None:
        """Replace the spool with these batches, the ones not replayed. Hold `locked()`."""
        if batches:
            partial = self.path.with_name(self.path.name + ".tmp")
            with open(_private(partial, os.O_WRONLY | os.O_TRUNC), "wb") as handle:
                handle.writelines(batch.line() for batch in batches)
                handle.flush()
                os.fsync(handle.fileno())
            partial.replace(self.path)
        else:
            self.path.unlink(missing_ok=True)
        _sync_directory(self.directory)

    def reject(self, batch: SpooledBatch, reason: Exception) -> None:
        entry = {
            "rejected_at": datetime.now(UTC).isoformat(),
            "reason": f"{type(reason).__name__}: {reason}",
            **json.loads(batch.line()),
        }
        _append_line(self.rejected_path, json.dumps(entry).encode() + b"\n")

    def status(self) -> SpoolStatus:
        batches = self.batches()
        try:
            rejected = self.rejected_path.read_bytes().count(b"\n")
        except FileNotFoundError:
            rejected = 0
        return SpoolStatus(
            self.tenant_id,
            len(batches),
            sum(len(batch.records) for batch in batches),
            batches[0].spooled_at if batches else None,
            rejected,
        )


def spooled_tenants(directory: Path) -> list[str]:
    """Tenants with a spool or a rejected file in this folder."""
    names = {path.name.split(SPOOL_SUFFIX)[0] for path in directory.glob(f"*{SPOOL_SUFFIX}*")}
    return sorted(
        name
        for name in names
        if (directory / f"{name}{SPOOL_SUFFIX}").exists()
        or (directory / f"{name}{SPOOL_SUFFIX}.rejected").exists()
    )


def _trace_ids(records: Sequence[NewContext]) -> str:
    ids = sorted({record.trace_id for record in records if record.trace_id})
    more = f" and {len(ids) - 5} more" if len(ids) > 5 else ""
    return (", ".join(ids[:5]) + more) or "none"


def batches_per_append(batches: Sequence[Sequence[NewContext]], start: int) -> int:
    """How many consecutive batches from `start` go in one append: at least one, at most
    REPLAY_GROUP_RECORDS records otherwise, and no id twice (a batch may not repeat an id)."""
    ids = {record.context_id for record in batches[start]}
    for index in range(start + 1, len(batches)):
        batch_ids = {record.context_id for record in batches[index]}
        if len(ids) + len(batch_ids) > REPLAY_GROUP_RECORDS or not ids.isdisjoint(batch_ids):
            return index - start
        ids |= batch_ids
    return len(batches) - start


class SpoolingStore:
    """A Store whose own failures never reach the caller; see the module docstring."""

    def __init__(
        self,
        store: Store,
        directory: Path | None = None,
        *,
        timeout_s: float = 10.0,
        retry_min_s: float = 0.5,
        retry_max_s: float = 60.0,
        strict: bool = False,
    ) -> None:
        self.store = store
        self.strict = strict  # a refused key raises instead of spooling
        self.tenant_id = store.tenant_id
        self.timeout_s = timeout_s
        self.retry_min_s = retry_min_s
        self.retry_max_s = retry_max_s
        self.spool = SpoolFile(directory or spool_dir(Settings()), store.tenant_id)
        self.spool.prepare()  # an unwritable spool fails now, at set-up, not during an outage
        self._lock = asyncio.Lock()  # one drain or append at a time keeps the records in order
        self._retry_delay = 0.0
        self._next_attempt = 0.0
        self._retry: asyncio.Task[None] | None = None
        self._set_depth(self.spool.status().records)

    async def append(
        self, proposals: Sequence[NewContext], *, texts: Mapping[str, str] | None = None
    ) -> list[Appended]:
        if texts:  # a spool keeps records, never text
            raise BadParameter("capture_text needs a PostgresStore; over HTTP, POST /v1/answers")
        return await self.append_batches([proposals])

    async def append_batches(self, batches: Sequence[Sequence[NewContext]]) -> list[Appended]:
        """Consecutive batches in one append of the store; raises REFUSED_RECORDS for them all.
        Spooled, each stays a batch of its own: one the store refuses on replay takes no other
        with it."""
        async with self._lock:
            failure = None
            if await self._caught_up():
                try:
                    return await self._store_append([p for batch in batches for p in batch])
                except REFUSED_RECORDS:
                    raise
                except Exception as exc:
                    if self.strict and isinstance(exc, Unauthorized | Forbidden):
                        raise
                    failure = exc
            return await self._spool(batches, failure)

    async def get(self, context_id: str) -> ContextRecord | None:
        return await self.store.get(context_id)

    async def text_hash_key(self) -> bytes | None:
        return await self.store.text_hash_key()

    async def record_query(self, query: QueryIn) -> dict[str, Any]:
        """Not spooled: a gateway's query is recorded now or not at all (degrade-open)."""
        return await self.store.record_query(query)

    async def replay(self, progress: Progress = unwatched) -> Replay:
        """Replay the spool now, whatever the backoff."""
        async with self._lock:
            return await self._drain(progress)

    async def aclose(self) -> None:
        """Stop the background retry; whatever waits stays in the spool for the next run."""
        if self._retry is not None:
            self._retry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retry

    async def _store_append(self, proposals: Sequence[NewContext]) -> list[Appended]:
        async with asyncio.timeout(self.timeout_s):
            return await self.store.append(proposals)

    async def _caught_up(self) -> bool:
        """Whether nothing waits in the spool, after replaying it if a retry is due."""
        if not self.spool.waiting():
            return True
        if time.monotonic() < self._next_attempt:
            return False
        return (await self._drain()).remaining == 0

    async def _spool(
        self, batches: Sequence[Sequence[NewContext]], failure: Exception | None
    ) -> list[Appended]:
        """Keep the batches, behind what waits already; `failure` is why the store did not take
        them."""
        proposals = [proposal for batch in batches for proposal in batch]
        check_batch(self.tenant_id, proposals)  # a caller's bug raises, store down or not
        if failure is not None:
            self._store_failed(failure, proposals)
        spooled_at = datetime.now(UTC)
        async with self.spool.locked():
            self.spool.add(*(SpooledBatch(spooled_at, list(batch)) for batch in batches))
        self._set_depth(_depths[self.spool.path] + len(proposals))
        log.info(
            "spooled %d lineage record(s) for tenant %s (trace_id %s)",
            len(proposals),
            self.tenant_id,
            _trace_ids(proposals),
        )
        self._retry_in_background()
        return [
            Appended(proposal.stamped(self.tenant_id, spooled_at), created=False, spooled=True)
            for proposal in proposals
        ]

    async def _drain(self, progress: Progress = unwatched) -> Replay:
        """Replay the spool oldest first, until it is empty or the store fails again."""
        replayed = rejected = done = isolate_until = 0
        error: str | None = None
        async with self.spool.locked():
            batches = self.spool.batches()
            record_lists = [batch.records for batch in batches]
            waiting = sum(len(records) for records in record_lists)
            while done < len(batches):
                progress(f"replay {self.tenant_id}", replayed + rejected, waiting)
                isolating = done < isolate_until
                size = 1 if isolating else batches_per_append(record_lists, done)
                group = batches[done : done + size]
                records = [record for batch in group for record in batch.records]
                try:
                    await self._store_append(records)
                except REFUSED_RECORDS as exc:
                    if len(group) > 1:
                        isolate_until = done + len(group)  # find the refused batch among them
                        continue
                    self.reject(group[0], exc)
                    rejected += len(records)
                except Exception as exc:
                    self._store_failed(exc, records)
                    error = f"{type(exc).__name__}: {exc}"
                    break
                else:
                    replayed += len(records)
                done += len(group)
            progress(f"replay {self.tenant_id}", replayed + rejected, waiting)
            if done:
                self.spool.keep(batches[done:])
        remaining = sum(len(batch.records) for batch in batches[done:])
        self._set_depth(remaining)
        if error is None:
            self._retry_delay = self._next_attempt = 0.0
        if done:
            log.info(
                "replayed %d spooled lineage record(s) for tenant %s; %d rejected, %d waiting",
                replayed,
                self.tenant_id,
                rejected,
                remaining,
            )
        return Replay(replayed, rejected, remaining, error)

    def _store_failed(self, exc: Exception, records: Sequence[NewContext]) -> None:
        """Log and count the failure, and wait longer before the next attempt."""
        self._retry_delay = min(self.retry_max_s, max(self.retry_min_s, 2 * self._retry_delay))
        self._next_attempt = time.monotonic() + self._retry_delay
        refused = isinstance(exc, Unauthorized | Forbidden)
        metrics.count_degraded("credentials_refused" if refused else "store_unavailable")
        log.log(
            logging.ERROR if refused else logging.WARNING,
            "lineage store %s (%s: %s): %d record(s) of tenant %s wait in %s; "
            "next attempt in %.2f s (trace_id %s)",
            "refused the key (fix or replace it: nothing is stored until then)"
            if refused
            else "unavailable",
            type(exc).__name__,
            exc,
            len(records),
            self.tenant_id,
            self.spool.path,
            self._retry_delay,
            _trace_ids(records),
        )

    def reject(self, batch: SpooledBatch, exc: Exception) -> None:
        """Set aside a batch the store refused (REFUSED_RECORDS): no caller is left to raise to."""
        self.spool.reject(batch, exc)
        metrics.count_degraded("spool_rejected", len(batch.records))
        log.error(
            "the store refused %d lineage record(s) of tenant %s that no caller waits for (%s); "
            "moved to %s (trace_id %s)",
            len(batch.records),
            self.tenant_id,
            exc,
            self.spool.rejected_path,
            _trace_ids(batch.records),
        )

    def _set_depth(self, records: int) -> None:
        """This process's view; another process adding to the same spool shows at the next drain."""
        _depths[self.spool.path] = records
        metrics.set_spool_depth(sum(_depths.values()))

    def _retry_in_background(self) -> None:
        if self._retry is None or self._retry.done():
            self._retry = asyncio.get_running_loop().create_task(self._retry_until_caught_up())

    async def _retry_until_caught_up(self) -> None:
        while True:
            await asyncio.sleep(max(0.0, self._next_attempt - time.monotonic()))
            async with self._lock:
                if await self._caught_up():
                    return
