"""Live sampling: verify a share of new answers and hand-offs in the background.

`LINEAGE_SAMPLE_SHARE` (0 to 1; 0 is off) of the answers, claims and hand-offs (summary,
reasoning, plan, tool_call) appended through the API are queued, and one worker verifies them
with the service's judge and the captured texts, appending verdicts as `lineage verify` does.
Degrade-open: a full queue (LINEAGE_SAMPLE_QUEUE) drops the record, and a failed verification
is logged; neither touches the request that appended it. Both are counted
(`lineage_sampled{outcome}`), with the queue depth as `lineage_sample_queue`.
"""

import asyncio
import logging
import random
from collections.abc import Callable, Iterable
from typing import Final

from prometheus_client import Counter, Gauge

from lineage.claims.handoffs import CLAIM_KINDS, HANDOFF_KINDS, verify_any
from lineage.claims.judges import Judge
from lineage.core import tasks
from lineage.db.database import Database

__all__ = ["SAMPLED_KINDS", "Sampler"]

log = logging.getLogger(__name__)
SAMPLED_KINDS: Final = frozenset({"answer"} | HANDOFF_KINDS)
# Claims are verified through their answer; a claim appended on its own is sampled alone.
_ALONE: Final = CLAIM_KINDS - {"answer"}

SAMPLED = Counter(
    "lineage_sampled",
    "Records chosen for background verification, by outcome (queued, dropped, verified, failed).",
    ["outcome"],
)
QUEUE_DEPTH = Gauge("lineage_sample_queue", "Records waiting for background verification.")


class Sampler:
    """A bounded queue and one worker. `offer` never blocks and never raises."""

    def __init__(
        self,
        share: float,
        capacity: int,
        judge: Callable[[], Judge],
        database: Callable[[], Database | None],
        chance: Callable[[], float] = random.random,
    ) -> None:
        self.share = share
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue(maxsize=capacity)
        self._judge = judge
        self._database = database
        self._chance = chance
        self._worker: asyncio.Task[None] | None = None

    def offer(self, tenant_id: str, records: Iterable[tuple[str, str]]) -> None:
        """Consider new records (context id, kind) of one tenant for verification."""
        if self.share <= 0:
            return
        for context_id, kind in records:
            if kind not in SAMPLED_KINDS | _ALONE or self._chance() >= self.share:
                continue
            try:
                self._queue.put_nowait((tenant_id, context_id))
            except asyncio.QueueFull:
                SAMPLED.labels("dropped").inc()
                continue
            SAMPLED.labels("queued").inc()
            QUEUE_DEPTH.set(self._queue.qsize())

    def start(self) -> None:
        if self.share > 0 and self._worker is None:
            self._worker = asyncio.create_task(self._run(), name="sampler")

    async def stop(self) -> None:
        if self._worker is not None:
            await tasks.stop(self._worker)
            self._worker = None

    async def drain(self) -> None:
        """Wait until every queued record has been verified (or has failed)."""
        await self._queue.join()

    async def _run(self) -> None:
        while True:
            tenant_id, context_id = await self._queue.get()
            QUEUE_DEPTH.set(self._queue.qsize())
            try:
                database = self._database()
                if database is None:
                    raise RuntimeError("the database is not connected")
                await verify_any(database, tenant_id, context_id, self._judge())
                SAMPLED.labels("verified").inc()
            except Exception:
                SAMPLED.labels("failed").inc()
                log.exception("background verification of %s failed", context_id)
            finally:
                self._queue.task_done()
