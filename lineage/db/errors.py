"""Which database errors are outages: the database itself failed (down, restarting, out of
connections, cancelled, unreachable), nothing in the request was wrong, and the same request
can succeed later."""

from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg

from lineage.core.errors import StoreUnavailable

OUTAGE_ERRORS: tuple[type[Exception], ...] = (
    OSError,  # refused, reset, unreachable, timed out (TimeoutError is an OSError)
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InsufficientResourcesError,
    asyncpg.exceptions.InternalClientError,  # its protocol state when a connection broke mid-call
)
# The primary cannot take a write or answer a lookup now: an outage, or a server that is a
# standby (pointed at one, or being promoted).
PRIMARY_UNAVAILABLE: tuple[type[Exception], ...] = (
    *OUTAGE_ERRORS,
    asyncpg.exceptions.ReadOnlySQLTransactionError,
)
# Work that must reach the primary waits at most this long before it is treated as down.
PRIMARY_TIMEOUT_S = 2.0


def is_outage(exc: BaseException) -> bool:
    """An outage error, or an error raised over one: a transaction's rollback on a dead
    connection raises InterfaceError ("connection is closed") with the real cause as context."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, OUTAGE_ERRORS):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


@contextmanager
def outage_as_unavailable() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        if not is_outage(exc):
            raise
        raise StoreUnavailable(f"PostgreSQL is unavailable: {type(exc).__name__}: {exc}") from exc
