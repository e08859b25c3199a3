"""Which database errors are outages: the database itself failed (down, restarting, out of
connections, cancelled, unreachable) or Citus moved the tenant's shard under the statement,
nothing in the request was wrong, and the same request can succeed later."""

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
# Citus moved or split the shard a statement had planned for (it waited on the operation's
# lock, was sent to the worker that held it, or ran as a function delegated there whose own
# query then found the shard gone), raised as internal errors: the same work, run again,
# finds the shard where it is now.
SHARD_MOVED = (
    "could not find valid entry for shard",
    "failure on connection marked as essential",
    "cannot execute a distributed query from a query on a shard",
)


def is_shard_moved(exc: BaseException) -> bool:
    return isinstance(exc, asyncpg.exceptions.InternalServerError) and str(exc).startswith(
        SHARD_MOVED
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
        if isinstance(cause, OUTAGE_ERRORS) or is_shard_moved(cause):
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
