"""What one caller, or all callers together, may ask of this process: a cap on bad requests per
verified key or address, a body size limit and read deadline, and a cap on requests in flight
that sheds overload.

Order, outermost first: CapBadRequests (verifies the caller once, so that a cap is keyed by a
key that is really the caller's), LimitBody (the whole body, read within a deadline and a size
cap, before the app sees it), ShedOverload (counts only requests that got this far with a
verified caller: an idle or unauthenticated socket never holds a slot).

Each is plain ASGI rather than Starlette's BaseHTTPMiddleware, whose extra tasks and streams
per request cost more CPU than the rest of a small request's path through the framework.
Counts live in this process only.
"""

import asyncio
import time
from collections import OrderedDict, deque

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lineage.api import problems
from lineage.api.deps import caller_of, verified_caller
from lineage.core.errors import (
    BodyTooLarge,
    Overloaded,
    RequestTimeout,
    StoreUnavailable,
    TooManyRequests,
)
from lineage.db.errors import is_outage

# Answers that mean the caller sent something wrong; 404 is left out (a walk of an unknown
# id is an ordinary question).
BAD_STATUSES = frozenset({400, 401, 403, 405, 408, 413, 415, 422})
# Health checks, scrapes and live event streams are never shed, nor counted as in flight: a
# busy process must still answer its probes, and a stream stays open for hours (streams are
# counted and capped per key and tenant instead: lineage/api/fairness.py).
NEVER_SHED = ("/healthz", "/readyz", "/metrics", "/v1/events")
# Never refused by the bad-request cap, which an anonymous client can fill for its address: the
# probes, the scrape, the explorer's static page and logging in stay open to everyone behind it.
# Their bad answers (a wrong key at login) still count against the other routes.
NEVER_CAPPED = ("/healthz", "/readyz", "/metrics", "/ui", "/v1/session")
SHED_RETRY_AFTER_S = 1
# A body left unread is not drained: the connection ends with the answer.
CLOSE = {"Connection": "close"}
# Callers whose recent bad requests are remembered; past it the least recently seen is dropped.
MAX_TRACKED_CALLERS = 10_000


async def identity(scope: Scope) -> str:
    """The verified key id of the caller (never a key id only claimed), else its address."""
    try:
        caller = await caller_of(scope)
    except Exception as exc:  # database down: the route itself answers 503
        if not (isinstance(exc, StoreUnavailable) or is_outage(exc)):
            raise
        caller = None
    if caller is not None and caller.key_id is not None:
        return "key:" + caller.key_id
    client = scope.get("client")
    return "addr:" + (client[0] if client else "unknown")


class BadRequestCap:
    def __init__(self, limit: int, window_s: float, max_tracked: int = MAX_TRACKED_CALLERS) -> None:
        self.limit = limit
        self.window_s = window_s
        self.max_tracked = max_tracked
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()

    def _recent(self, who: str) -> deque[float]:
        times = self._seen.get(who, deque())
        horizon = time.monotonic() - self.window_s
        while times and times[0] < horizon:
            times.popleft()
        if not times:
            self._seen.pop(who, None)  # nothing recent: forget the caller
        return times

    def tracked(self) -> int:
        return len(self._seen)

    def retry_after(self, who: str) -> int | None:
        """Seconds until `who` may ask again, or None when under the cap."""
        times = self._recent(who)
        if len(times) < self.limit:
            return None
        return max(1, int(times[0] + self.window_s - time.monotonic()) + 1)

    def note(self, who: str, status: int) -> None:
        if status not in BAD_STATUSES:
            return
        times = self._recent(who)
        times.append(time.monotonic())
        self._seen[who] = times
        self._seen.move_to_end(who)
        while len(self._seen) > self.max_tracked:
            self._seen.popitem(last=False)


class CapBadRequests:
    """429 for a key or address that sent more than `cap.limit` bad requests (any answer in
    BAD_STATUSES, from here or from an inner layer) within `cap.window_s`, on every route but
    those NEVER_CAPPED."""

    def __init__(self, app: ASGIApp, cap: BadRequestCap) -> None:
        self.app = app
        self.cap = cap

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        who = await identity(scope)
        wait = None if _under(scope["path"], NEVER_CAPPED) else self.cap.retry_after(who)
        if wait is not None:
            response = problems.answer(
                TooManyRequests(
                    f"more than {self.cap.limit} bad requests in {self.cap.window_s:g} s from "
                    "this key or address; fix the requests (see the earlier 4xx details) and "
                    "retry later"
                ),
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
    """Read the whole body before the app sees the request: 413 past `max_body_bytes`, declared
    or streamed (chunked uploads too), and 408 when it takes longer than `read_timeout_s`."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, read_timeout_s: float) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.read_timeout_s = read_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = Headers(scope=scope).get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            await self._too_large(f"body is {length} bytes")(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.read_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return  # the client left: nobody to answer
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        await self._too_large("the streamed body ran past that")(
                            scope, receive, send
                        )
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            timed_out = problems.answer(
                RequestTimeout(
                    f"the body did not arrive within {self.read_timeout_s:g} s "
                    "(LINEAGE_BODY_READ_TIMEOUT_S); nothing was done: send it again, whole"
                ),
                CLOSE,
            )
            await timed_out(scope, receive, send)
            return
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # after the body: wait for the client to disconnect
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def _too_large(self, what: str) -> ASGIApp:
        return problems.answer(
            BodyTooLarge(
                f"{what}; at most {self.max_body_bytes} bytes (LINEAGE_MAX_BODY_BYTES): split "
                "the batch"
            ),
            CLOSE,
        )


class ShedOverload:
    """429 with Retry-After, at once, for a request that finds `limit` others in flight in this
    process (0: no limit). Queueing them instead would only make every answer late. Only
    requests from a verified caller count (with keys on): the others are answered at once."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.in_flight = 0  # one event loop per process: no lock needed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or not self.limit
            or _under(scope["path"], NEVER_SHED)
            or verified_caller(scope) is None
        ):
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            response = problems.answer(
                Overloaded(
                    f"this server process is at its limit of {self.limit} requests in progress "
                    "(LINEAGE_MAX_CONCURRENT_REQUESTS); nothing was done: send the same request "
                    f"again after {SHED_RETRY_AFTER_S} s"
                ),
                {"Retry-After": str(SHED_RETRY_AFTER_S)},
            )
            await response(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == prefix or path.startswith(prefix + "/") for prefix in prefixes)
