"""A cap on bad requests per key (or, without a key, per address): past it, 429 for a while.

It throttles key guessing and runaway clients; counts live in this process only.
"""

import time
from collections import defaultdict, deque

from fastapi import Request

# Answers that mean the caller sent something wrong; 404 is left out (a walk of an unknown
# id is an ordinary question).
BAD_STATUSES = frozenset({400, 401, 403, 405, 413, 415, 422})


def identity(request: Request) -> str:
    """The key id of a bearer key (never the secret), else the client address."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.startswith("lk_"):
        return "key:" + token[3:19]
    return "addr:" + (request.client.host if request.client else "unknown")


class BadRequestCap:
    def __init__(self, limit: int, window_s: float) -> None:
        self.limit = limit
        self.window_s = window_s
        self._seen: defaultdict[str, deque[float]] = defaultdict(deque)

    def _recent(self, who: str) -> deque[float]:
        times = self._seen[who]
        horizon = time.monotonic() - self.window_s
        while times and times[0] < horizon:
            times.popleft()
        return times

    def retry_after(self, who: str) -> int | None:
        """Seconds until `who` may ask again, or None when under the cap."""
        times = self._recent(who)
        if len(times) < self.limit:
            return None
        return max(1, int(times[0] + self.window_s - time.monotonic()) + 1)

    def note(self, who: str, status: int) -> None:
        if status in BAD_STATUSES:
            self._recent(who).append(time.monotonic())
