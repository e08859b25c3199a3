"""What one caller, or all callers together, may ask of this process: a body size limit, a cap
on bad requests per key or address, and a cap on requests in flight that sheds overload.

Each is plain ASGI rather than Starlette's BaseHTTPMiddleware, whose extra tasks and streams
per request cost more CPU than the rest of a small request's path through the framework.
Counts live in this process only.
"""

import time
from collections import defaultdict, deque

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lineage.api import problems
from lineage.services.auth import bearer_token

# Answers that mean the caller sent something wrong; 404 is left out (a walk of an unknown
# id is an ordinary question).
BAD_STATUSES = frozenset({400, 401, 403, 405, 413, 415, 422})
# Health checks, scrapes and live event streams are never shed, nor counted as in flight: a
# busy process must still answer its probes, and a stream stays open for hours.
NEVER_SHED = ("/healthz", "/readyz", "/metrics", "/v1/events")
SHED_RETRY_AFTER_S = 1


def identity(scope: Scope) -> str:
    """The key id of a bearer key (never the secret), else the client address."""
    token = bearer_token(Headers(scope=scope).get("authorization", ""))
    if token is not None and token.startswith("lk_"):
        return "key:" + token[3:19]
    client = scope.get("client")
    return "addr:" + (client[0] if client else "unknown")


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


class CapBadRequests:
    """429 for a key or address that sent more than `cap.limit` bad requests (any answer in
    BAD_STATUSES, from here or from an inner layer) within `cap.window_s`."""

    def __init__(self, app: ASGIApp, cap: BadRequestCap) -> None:
        self.app = app
        self.cap = cap

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        who = identity(scope)
        wait = self.cap.retry_after(who)
        if wait is not None:
            response = problems.problem(
                429,
                "TooManyRequests",
                f"more than {self.cap.limit} bad requests in {self.cap.window_s:g} s from this "
                "key or address; fix the requests (see the earlier 4xx details) and retry later",
                {"Retry-After": str(wait)},
            )
            await response(scope, receive, send)
            return

        async def send_noting_status(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.cap.note(who, message["status"])
            await send(message)

        await self.app(scope, receive, send_noting_status)


class LimitBody:
    """413 before reading a body whose declared length is above `max_body_bytes`."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            length = Headers(scope=scope).get("content-length")
            if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
                response = problems.problem(
                    413,
                    "BodyTooLarge",
                    f"body is {length} bytes; at most {self.max_body_bytes}: split the batch",
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class ShedOverload:
    """429 with Retry-After, at once, for a request that finds `limit` others in flight in this
    process (0: no limit). Queueing them instead would only make every answer late."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.in_flight = 0  # one event loop per process: no lock needed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.limit or _never_shed(scope["path"]):
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            response = problems.problem(
                429,
                "Overloaded",
                f"this server process is at its limit of {self.limit} requests in progress "
                "(LINEAGE_MAX_CONCURRENT_REQUESTS); nothing was done: send the same request "
                f"again after {SHED_RETRY_AFTER_S} s",
                {"Retry-After": str(SHED_RETRY_AFTER_S)},
            )
            await response(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


def _never_shed(path: str) -> bool:
    return any(path == exempt or path.startswith(exempt + "/") for exempt in NEVER_SHED)
