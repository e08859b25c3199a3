"""Appends that return at once: a thread sends them to the lineage service, in order and in
batches, so that a pipeline never waits on lineage. SyncLineage uses it over HTTP
(lineage.store.sync), and so the framework hooks in lineage.integrations.

- append() checks the batch (a caller's bug raises now, as everywhere), queues it and returns
  its records as not stored yet (`Appended(..., spooled=True)`). It waits only while
  `max_queued_records` are queued already: when the thread cannot even spool them as fast.
- The thread sends what is queued through a SpoolingStore, consecutive batches as one
  `POST /v1/contexts/batch` (up to 500 records, lineage.store.spool.batches_per_append), so what
  queued while one request was out goes in the next. While the service is down they go to the
  spool in the order they were queued, and the spool drains first once it is back.
- A merged batch the service refuses is sent again batch by batch; a batch it refuses on its own
  (a parent it does not know, an id stored with other content) has no caller left to raise to:
  it is set aside in the spool's rejected file, logged and counted, as a refused replay is.
- replay() waits until everything queued before it is sent or spooled, then replays the spool
  whatever the backoff. aclose() does the same and stops the thread; so does the interpreter's
  exit for a script that never closes.
"""

import asyncio
import atexit
import itertools
import logging
import threading
from collections import deque
from collections.abc import Coroutine, Mapping, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from lineage.core import metrics
from lineage.core.errors import BadParameter, StoreUnavailable
from lineage.core.queries import QueryIn
from lineage.core.record import ContextRecord, NewContext, check_batch
from lineage.core.store import Appended
from lineage.store.http import HttpStore
from lineage.store.spool import (
    REFUSED_RECORDS,
    REPLAY_GROUP_RECORDS,
    Replay,
    SpooledBatch,
    SpoolingStore,
    batches_per_append,
)

log = logging.getLogger(__name__)
Result = TypeVar("Result")


class BackgroundStore:
    """A Store whose appends a thread sends; see the module docstring."""

    def __init__(
        self, remote: HttpStore, spool_directory: Path, *, max_queued_records: int = 10_000
    ) -> None:
        self.tenant_id = remote.tenant_id
        self.max_queued_records = max_queued_records
        self._remote = remote
        self._spooling = SpoolingStore(remote, spool_directory)
        # Batches to send, each with None, or a replay's answer waiting for what came before it.
        self._queue: deque[tuple[list[NewContext], Future[Replay] | None]] = deque()
        self._queued_records = 0
        # Guards the queue and its count; notified as sent records leave it.
        self._queue_lock = threading.Condition()
        self._stopping = False
        self._loop = asyncio.new_event_loop()
        self._wake = asyncio.Event()
        self._thread = threading.Thread(target=self._run, name="lineage-sender", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    async def append(
        self, proposals: Sequence[NewContext], *, texts: Mapping[str, str] | None = None
    ) -> list[Appended]:
        if texts:
            raise BadParameter("capture_text needs a PostgresStore; over HTTP, POST /v1/answers")
        check_batch(self.tenant_id, proposals)
        if not proposals:
            return []
        if not self._enqueue(list(proposals), None, wait=False):
            # The thread is behind even its spool: wait for room, off this loop.
            await asyncio.to_thread(self._enqueue, list(proposals), None, wait=True)
        now = datetime.now(UTC)
        return [
            Appended(proposal.stamped(self.tenant_id, now), created=False, spooled=True)
            for proposal in proposals
        ]

    async def get(self, context_id: str) -> ContextRecord | None:
        """A record the service holds; one still queued here is not there yet."""
        return await self._on_sender(self._spooling.get(context_id))

    async def text_hash_key(self) -> None:
        """The key never leaves the service: it keys query, claim and answer hashes itself."""
        return

    async def record_query(self, query: QueryIn) -> dict[str, Any]:
        return await self._on_sender(self._spooling.record_query(query))

    async def replay(self) -> Replay:
        """Send what is queued, then what waits in the spool, whatever the backoff."""
        return await asyncio.wrap_future(self._replay_after_queue())

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Send what is queued and try the spool once more; what the service cannot take now
        stays in the spool for the next run, or `lineage spool replay --api-url`."""
        with self._queue_lock:
            if self._stopping:
                return
        atexit.unregister(self.close)
        try:
            self._replay_after_queue().result()
        except Exception:  # degrade-open: what could not be spooled was logged where it failed
            log.exception("lineage could not replay its spool on closing")
        with self._queue_lock:
            self._stopping = True
            self._queue_lock.notify_all()
        self._loop.call_soon_threadsafe(self._wake.set)
        self._thread.join()

    def _replay_after_queue(self) -> Future[Replay]:
        replayed: Future[Replay] = Future()
        self._enqueue([], replayed, wait=False)
        return replayed

    def _enqueue(
        self, batch: list[NewContext], replayed: Future[Replay] | None, *, wait: bool
    ) -> bool:
        """Queue the batch, once there is room if `wait`; else False while the queue is full."""
        with self._queue_lock:
            while batch and self._queued_records and not self._stopping:
                if self._queued_records + len(batch) <= self.max_queued_records:
                    break
                if not wait:
                    return False
                self._queue_lock.wait()
            if self._stopping:
                raise BadParameter("this lineage store is closed; open a new one to record more")
            self._queue.append((batch, replayed))
            self._queued_records += len(batch)
        self._loop.call_soon_threadsafe(self._wake.set)
        return True

    def _on_sender(self, call: Coroutine[Any, Any, Result]) -> "asyncio.Future[Result]":
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call, self._loop))

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self._send_until_stopped())
        finally:
            self._loop.close()
            with self._queue_lock:  # stopped, by close() or a bug: nobody waits forever
                self._stopping = True
                self._queue_lock.notify_all()
                waiting = [replayed for _, replayed in self._queue if replayed is not None]
            for replayed in waiting:
                replayed.set_exception(StoreUnavailable("the lineage sender thread stopped"))

    async def _send_until_stopped(self) -> None:
        try:
            while True:
                batches, replayed = self._take()
                if batches:
                    await self._send(batches)
                    with self._queue_lock:
                        self._queued_records -= sum(len(batch) for batch in batches)
                        self._queue_lock.notify_all()
                elif replayed is not None:
                    try:
                        replayed.set_result(await self._spooling.replay())
                    except Exception as exc:  # a spool it cannot read: the caller's to see
                        replayed.set_exception(exc)
                elif self._stopping:
                    return
                else:
                    await self._wake.wait()
                    self._wake.clear()
        finally:
            await self._spooling.aclose()
            await self._remote.aclose()

    def _take(self) -> tuple[list[list[NewContext]], Future[Replay] | None]:
        """The batches at the head of the queue that go in one append; else the replay there."""
        with self._queue_lock:
            if not self._queue:
                return [], None
            if self._queue[0][1] is not None:
                return [], self._queue.popleft()[1]
            head = itertools.takewhile(lambda queued: queued[1] is None, self._queue)
            batches = [batch for batch, _ in itertools.islice(head, REPLAY_GROUP_RECORDS)]
            batches = batches[: batches_per_append(batches, 0)]
            for _ in batches:
                self._queue.popleft()
            return batches, None

    async def _send(self, batches: list[list[NewContext]]) -> None:
        records = [record for batch in batches for record in batch]
        try:
            await self._spooling.append_batches(batches)
        except REFUSED_RECORDS as exc:
            if len(batches) == 1:
                self._spooling.reject(SpooledBatch(datetime.now(UTC), records), exc)
                return
            for batch in batches:  # find the refused batch among them
                await self._send([batch])
        except Exception:  # degrade-open: the spool failed too (a full disk); the thread goes on
            log.exception(
                "lineage lost %d record(s) of tenant %s: it could neither send nor spool them",
                len(records),
                self.tenant_id,
            )
            metrics.count_degraded("records_lost", len(records))
