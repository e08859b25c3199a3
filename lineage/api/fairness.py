"""Fair shares of the heavy work one process does: how many exports, impact files and streamed
impact answers, and how many live event streams, one key and one tenant may hold at once.

ShedOverload (lineage/api/limits.py) caps every request in flight, whoever sends it; it cannot
stop one tenant from filling the process with exports while another tenant's walks wait
behind them (4 concurrent exports took another tenant's walk-back p95 from 43 to 625 ms), and
it never counts event streams, which stay open for hours. A slot here is taken once the caller
is verified and given back when the answer is sent, streamed bodies included; past a limit the
request is answered 429 with Retry-After at once, having done nothing. Counts live in this
process only, like the other limits.
"""

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal

from lineage.core import metrics
from lineage.core.errors import TooMuchAtOnce
from lineage.services.auth import Caller
from lineage.settings import Settings

Work = Literal["heavy", "event_stream"]
# What each kind of work is, and the settings that bound it, for the refusal to say.
_NAMES: dict[Work, tuple[str, str]] = {
    "heavy": ("exports, impact files and streamed impact answers", "LINEAGE_MAX_HEAVY"),
    "event_stream": ("live event streams", "LINEAGE_MAX_EVENT_STREAMS"),
}


@dataclass(frozen=True)
class Limits:
    per_key: int  # 0: no limit
    per_tenant: int


class FairShares:
    """Slots of each kind of work, counted per key and per tenant."""

    def __init__(self, settings: Settings) -> None:
        self.limits: dict[Work, Limits] = {
            "heavy": Limits(settings.max_heavy_per_key, settings.max_heavy_per_tenant),
            "event_stream": Limits(
                settings.max_event_streams_per_key, settings.max_event_streams_per_tenant
            ),
        }
        # One event loop per process: no lock needed.
        self._by_key: dict[Work, Counter[str]] = {work: Counter() for work in self.limits}
        self._by_tenant: dict[Work, Counter[str]] = {work: Counter() for work in self.limits}

    def held(self, work: Work, caller: Caller) -> tuple[int, int]:
        """How many slots of `work` the caller's key and tenant hold now."""
        key = self._by_key[work][caller.key_id] if caller.key_id is not None else 0
        return key, self._by_tenant[work][caller.tenant_id]

    @asynccontextmanager
    async def slot(self, work: Work, caller: Caller) -> AsyncIterator[None]:
        """Hold one slot of `work` while the block runs, or TooMuchAtOnce past a limit."""
        limits = self.limits[work]
        by_key, by_tenant = self.held(work, caller)
        what, setting = _NAMES[work]
        if limits.per_key and caller.key_id is not None and by_key >= limits.per_key:
            metrics.count_work_refused(work, "key")
            raise TooMuchAtOnce(
                f"this key already has {by_key} {what} in progress, its limit "
                f"({setting}_PER_KEY); nothing was done: retry when one has finished"
            )
        if limits.per_tenant and by_tenant >= limits.per_tenant:
            metrics.count_work_refused(work, "tenant")
            raise TooMuchAtOnce(
                f"this tenant already has {by_tenant} {what} in progress, its limit "
                f"({setting}_PER_TENANT); nothing was done: retry when one has finished"
            )
        if caller.key_id is not None:
            self._by_key[work][caller.key_id] += 1
        self._by_tenant[work][caller.tenant_id] += 1
        metrics.WORK_IN_PROGRESS.labels(work).inc()
        try:
            yield
        finally:
            metrics.WORK_IN_PROGRESS.labels(work).dec()
            if caller.key_id is not None:
                _give_back(self._by_key[work], caller.key_id)
            _give_back(self._by_tenant[work], caller.tenant_id)


def _give_back(counts: Counter[str], who: str) -> None:
    counts[who] -= 1
    if counts[who] <= 0:
        del counts[who]  # a caller holding nothing is forgotten
