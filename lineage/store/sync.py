"""derive() for scripts without an event loop: one private loop runs the async store."""

import asyncio
from types import TracebackType
from typing import Any

from lineage.core import DEFAULT_TENANT
from lineage.core.derive import Context, Derivation, derive, derive_many
from lineage.db.database import Database
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from lineage.store.spool import SpoolingStore


class SyncLineage:
    """`with SyncLineage(url) as lineage: doc = lineage.core.derive([], text, "document", ...)`.

    Degrade-open: while the database is down, records wait in the local spool (lineage.store.spool)
    and the pipeline goes on; bad records still raise.
    """

    def __init__(
        self, database_url: str, tenant_id: str = DEFAULT_TENANT, settings: Settings | None = None
    ) -> None:
        self._runner = asyncio.Runner()
        # min_size 0: no connection is needed to start, so a database outage cannot stop it.
        self._database = self._runner.run(
            Database.connect(settings or Settings(), database_url, min_size=0, max_size=2)
        )
        self.store = SpoolingStore(PostgresStore(self._database, tenant_id))

    def derive(self, *args: Any, **kwargs: Any) -> Context:
        """The same arguments as lineage.core.derive(), without the store."""
        return self._runner.run(derive(self.store, *args, **kwargs))

    def derive_many(self, items: list[Derivation]) -> list[Context]:
        return self._runner.run(derive_many(self.store, items))

    def close(self) -> None:
        self._runner.run(self.store.aclose())
        self._runner.run(self._database.close())
        self._runner.close()

    def __enter__(self) -> "SyncLineage":
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
