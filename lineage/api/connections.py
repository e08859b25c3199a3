"""What a connection may hold before it is a request: uvicorn's httptools protocol with a deadline
for the headers and a cap on connections per client address.

uvicorn times a connection out only between requests, once it has answered one
(`timeout_keep_alive`), and its `limit_concurrency` counts every address together (one client
holding the limit gets everyone else 503s). Neither stops a socket that connects and sends
nothing, or half its headers: each holds a file descriptor for as long as the client likes,
below the ASGI app, which sees a request only once its headers are complete. This protocol
closes a connection whose request headers are not complete within `header_timeout_s` of its
opening or of its last answer, and one from an address that already holds
`max_per_address` connections to this process. The body has its own deadline
(lineage.api.limits.LimitBody).

`create_app` sets the limits from its settings (`guard_connections`) in the process it runs in;
`lineage serve` passes PROTOCOL to uvicorn as its `http` (anyone serving the app themselves:
`uvicorn --http lineage.api.connections:GuardedHttpToolsProtocol --factory ...`).
"""

import asyncio
import collections
from dataclasses import dataclass, field
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from lineage.core import metrics
from lineage.settings import Settings

__all__ = ["PROTOCOL", "GuardedHttpToolsProtocol", "guard_connections"]

PROTOCOL = "lineage.api.connections:GuardedHttpToolsProtocol"


@dataclass
class ConnectionLimits:
    """This process's limits, and the connections each address holds now."""

    header_timeout_s: float = Settings.model_fields["header_read_timeout_s"].default
    max_per_address: int = Settings.model_fields["max_connections_per_address"].default
    held: collections.Counter[str] = field(default_factory=collections.Counter)


LIMITS = ConnectionLimits()


def guard_connections(settings: Settings) -> None:
    """Hold the connections this process serves to `settings`' limits."""
    LIMITS.header_timeout_s = settings.header_read_timeout_s
    LIMITS.max_per_address = settings.max_connections_per_address


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing connections that hold a descriptor for nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._address: str | None = None
        self._headers_deadline: asyncio.TimerHandle | None = None
        # Requests whose headers are complete, and answers sent: equal while it waits for one.
        self._requests = 0
        self._answers = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = self.client[0] if self.client else ""
        if LIMITS.max_per_address and LIMITS.held[address] >= LIMITS.max_per_address:
            metrics.count_connection_closed("address_cap")
            transport.abort()  # nothing read, nothing to answer; the descriptor goes at once
            return
        LIMITS.held[address] += 1
        self._address = address
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        if self._address is not None:
            LIMITS.held[self._address] -= 1
            if LIMITS.held[self._address] <= 0:
                del LIMITS.held[self._address]
            self._address = None
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        self._requests += 1
        self._stop_deadline()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        self._answers += 1
        super().on_response_complete()
        if self._answers >= self._requests and not self.transport.is_closing():
            self._await_headers()

    def _await_headers(self) -> None:
        self._stop_deadline()
        self._headers_deadline = self.loop.call_later(
            LIMITS.header_timeout_s, self._headers_too_late
        )

    def _stop_deadline(self) -> None:
        if self._headers_deadline is not None:
            self._headers_deadline.cancel()
            self._headers_deadline = None

    def _headers_too_late(self) -> None:
        self._headers_deadline = None
        if self._answers >= self._requests and not self.transport.is_closing():
            metrics.count_connection_closed("header_timeout")
            self.transport.close()
