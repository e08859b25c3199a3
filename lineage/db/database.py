"""The one handle on the database: built once at start-up (by the app, a CLI command or an SDK
store), it owns the pools, the keyring that signs records and the settings. Work is done in
tenant transactions it opens; a function takes the Database, or the Transaction it opened.

    database = await Database.connect(settings)
    async with database.tenant("acme") as tx:
        rows = await tx.fetch("get_contexts", context_ids=["ctx_1"])

The services append through a Transaction (lineage.services.appends), signing with its keyring.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg

from lineage import db
from lineage.core import metrics
from lineage.db.errors import PRIMARY_TIMEOUT_S, PRIMARY_UNAVAILABLE
from lineage.db.keyring import signer_for
from lineage.settings import Settings

if TYPE_CHECKING:
    from lineage.db.keyring import Signer

__all__ = ["PENDING_WRITE", "Database", "PendingWrite", "Transaction"]

T = TypeVar("T")


@dataclass
class PendingWrite:
    """A named statement (`query`, with `values` but the tenant's) that rides, once, on the
    first transaction of `tenant_id` on the primary in the current task, so that it commits
    with that work; whoever set it writes it alone if none did (`written` still False). An
    HTTP request's audit row is one (lineage.services.audit.ride_along)."""

    tenant_id: str
    query: str
    values: dict[str, Any]
    written: bool = False


# The write waiting for the current task's first tenant transaction, if any.
PENDING_WRITE: ContextVar[PendingWrite | None] = ContextVar("pending_write", default=None)


class Transaction:
    """One transaction confined to one tenant (row security reads the tenant it set). Its
    named queries take the tenant's id unless given; what the services append in it is signed
    with its database's keyring."""

    def __init__(self, database: Database, connection: asyncpg.Connection, tenant_id: str) -> None:
        self.database = database
        self.connection = connection
        self.tenant_id = tenant_id

    @property
    def signer(self) -> Signer:
        return self.database.signer

    @property
    def token(self) -> str | None:
        """The tenant's token, for the owner's functions that take it (lineage_append)."""
        key = getattr(self.connection, "vouching_key", None)
        return None if key is None else db.tenant_token(key, self.tenant_id)

    def _values(self, values: dict[str, Any]) -> dict[str, Any]:
        return {"tenant_id": self.tenant_id, **values}

    async def fetch(self, name: str, **values: Any) -> list[asyncpg.Record]:
        return await db.fetch(self.connection, name, **self._values(values))

    async def execute(self, name: str, **values: Any) -> None:
        await db.execute(self.connection, name, **self._values(values))


class Database:
    """The pools (the primary, and the read replica when LINEAGE_READ_DATABASE_URL names one),
    the signer and the settings of one process."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: Settings,
        signer: Signer | None = None,
        *,
        read_pool: asyncpg.Pool | None = None,
        owns_pools: bool = False,
    ) -> None:
        self.pool = pool
        self.read_pool = read_pool or pool
        self.settings = settings
        self._signer = signer
        self._owns_pools = owns_pools
        self._reads: Database | None = None
        self._primary: Database | None = None  # of a `reads` view: whose signer it shares

    @property
    def signer(self) -> Signer:
        """The keyring that signs and verifies records: the one given, else the one the
        settings name, loaded (and made, the first time) when first needed, so that a command
        that signs nothing leaves the keyring alone."""
        if self._primary is not None:
            return self._primary.signer
        if self._signer is None:
            self._signer = signer_for(self.settings)
        return self._signer

    @classmethod
    async def connect(
        cls,
        settings: Settings,
        url: str | None = None,
        *,
        signer: Signer | None = None,
        read_url: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        as_owner: bool = False,
    ) -> Database:
        """Open the pools (`url` defaults to the settings' database, `read_url` to their read
        replica); the signer defaults to the keyring the settings name."""
        pool = await db.create_pool(
            url or db.database_url(settings),
            min_size=min_size,
            max_size=max_size,
            as_owner=as_owner,
        )
        read_pool = None
        read_url = read_url or settings.read_database_url
        if read_url:
            try:
                read_pool = await db.create_pool(read_url, min_size=min_size, max_size=max_size)
            except BaseException:
                await pool.close()
                raise
        return cls(pool, settings, signer, read_pool=read_pool, owns_pools=True)

    async def close(self) -> None:
        """Close the pools it opened; a pool it was handed is its owner's to close."""
        if self._owns_pools:
            if self.read_pool is not self.pool:
                await self.read_pool.close()
            await self.pool.close()

    @property
    def has_replica(self) -> bool:
        return self.read_pool is not self.pool

    @property
    def is_replica(self) -> bool:
        """Whether this is the `reads` view of a database with a read replica."""
        return self._primary is not None

    @property
    def reads(self) -> Database:
        """The same database, reading from the read replica when there is one: for work that
        only reads and may be behind the primary by the replica's lag."""
        if not self.has_replica:
            return self
        if self._reads is None:
            self._reads = Database(self.read_pool, self.settings)
            self._reads._primary = self
        return self._reads

    @asynccontextmanager
    async def tenant(
        self,
        tenant_id: str,
        *,
        statement_timeout_ms: int | None = None,
        generic_plans: bool = False,
    ) -> AsyncIterator[Transaction]:
        """A transaction confined to `tenant_id` (see lineage.db.transaction); on the primary,
        the first of the task's for its tenant also writes the pending write (PendingWrite)."""
        pending = self._pending_write(tenant_id)
        try:
            async with db.transaction(
                self.pool,
                tenant_id,
                statement_timeout_ms=statement_timeout_ms,
                generic_plans=generic_plans,
            ) as connection:
                if pending is not None:
                    pending.written = True  # a transaction of the task beside this one skips it
                    await db.execute(
                        connection, pending.query, tenant_id=tenant_id, **pending.values
                    )
                yield Transaction(self, connection, tenant_id)
        except BaseException:
            if pending is not None:
                pending.written = False  # rolled back: whoever set it writes it alone
            raise

    def _pending_write(self, tenant_id: str) -> PendingWrite | None:
        """The current task's write that the next work of `tenant_id` on the primary takes."""
        pending = PENDING_WRITE.get()
        if pending is None or pending.written or pending.tenant_id != tenant_id or self.is_replica:
            return None
        return pending

    async def fetch_one_call(
        self, tenant_id: str, sql: str, arguments: list[Any], timeout_s: float | None
    ) -> list[asyncpg.Record] | None:
        """The rows of `sql`, a read over one function that binds the tenant itself (its last
        two arguments follow `arguments`: the tenant's token, and the task's pending audit row
        or null), in one statement with no BEGIN or COMMIT; cancelled after `timeout_s`
        (TimeoutError), when given. None, having sent nothing, where the connection cannot (see
        db.ONE_CALL_READS, or no vouching key) or another pending write waits."""
        pending = self._pending_write(tenant_id)
        if pending is not None and pending.query != "audit_append":
            return None
        async with self.pool.acquire() as connection:
            key = getattr(connection, "vouching_key", None)
            if not getattr(connection, "one_call_reads", False) or key is None:
                return None
            audit = None if pending is None else db.jsonable(pending.values)
            if pending is not None:
                pending.written = True
            try:
                rows: list[asyncpg.Record] = await connection.fetch(
                    sql, *arguments, db.tenant_token(key, tenant_id), audit, timeout=timeout_s
                )
            except BaseException:
                if pending is not None:
                    pending.written = False  # rolled back: whoever set it writes it alone
                raise
        return rows

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A connection for what belongs to no tenant (keys, health, the operator's log)."""
        async with self.pool.acquire() as connection:
            yield connection

    async def server_version(self) -> int:
        """The server's PostgreSQL major version (15 for 15.12): it answers, and which."""
        async with self.connection() as connection:
            [row] = await db.fetch(connection, "server_version")
        version: int = row["server_version_num"]
        return version

    async def on_primary(self, work: Callable[[Database], Awaitable[T]]) -> T:
        """Work that must see the primary's newest state (a key revoked a moment ago), on the
        primary; while the primary cannot answer, on the read replica as replayed so far, so
        that reads go on. Without a replica, on the primary alone."""
        try:
            async with asyncio.timeout(PRIMARY_TIMEOUT_S):
                return await work(self)
        except PRIMARY_UNAVAILABLE:
            if not self.has_replica:
                raise
            metrics.count_degraded("keys_read_on_replica")
            return await work(self.reads)
