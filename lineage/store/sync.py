"""derive() for scripts without an event loop: one private loop runs the async store."""

import asyncio
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar

from lineage.core import DEFAULT_TENANT
from lineage.core.derive import Context, Derivation, derive, derive_many
from lineage.core.errors import BadParameter
from lineage.db.database import Database
from lineage.settings import Settings
from lineage.store.background import BackgroundStore
from lineage.store.http import HttpStore
from lineage.store.postgres import PostgresStore
from lineage.store.spool import Replay, SpoolingStore, spool_dir

Result = TypeVar("Result")
SERVICE_SCHEMES = ("http://", "https://")
# Over HTTP a request waits this long at most; only flush() and close() wait for requests.
SERVICE_TIMEOUT_S = 5.0


class SyncLineage:
    """`with SyncLineage(url) as lineage: doc = lineage.derive([], text, "document", ...)`.

    `url` is the lineage service's (`http://lineage:8765`, with an ingest key as `api_key`: no
    database credentials, no signing keys), or a PostgreSQL URL. Over HTTP, derive() returns at
    once and a thread sends the records in batches (lineage.store.background); into PostgreSQL
    it appends before it returns. Degrade-open either way: while the service or the database is
    down, records wait in the local spool (lineage.store.spool, `<data_dir>/spool/<tenant>.jsonl`,
    so `tenant_id` should be the key's tenant) and go out in order once it is back; bad records
    still raise. Threads may share one (a framework runs callbacks in threads of its own).
    """

    def __init__(
        self,
        url: str,
        tenant_id: str = DEFAULT_TENANT,
        settings: Settings | None = None,
        *,
        api_key: str | None = None,
    ) -> None:
        over_http = url.startswith(SERVICE_SCHEMES)
        if api_key is not None and not over_http:
            raise BadParameter(
                "api_key goes with the lineage service's URL (http://…); "
                "a PostgreSQL URL carries its own credentials"
            )
        settings = settings or Settings()
        self._runner = asyncio.Runner()
        self._runner_lock = threading.Lock()  # the runner's loop runs one call at a time
        self._database: Database | None = None
        self.store: BackgroundStore | SpoolingStore
        if over_http:
            remote = HttpStore(url, tenant_id, api_key, timeout_s=SERVICE_TIMEOUT_S)
            self.store = BackgroundStore(remote, spool_dir(settings))
        else:
            # min_size 0: no connection is needed to start, so a database outage cannot stop it.
            self._database = self._run(Database.connect(settings, url, min_size=0, max_size=2))
            self.store = SpoolingStore(
                PostgresStore(self._database, tenant_id), spool_dir(settings)
            )

    def derive(self, *args: Any, **kwargs: Any) -> Context:
        """The same arguments as lineage.core.derive(), without the store."""
        return self._run(derive(self.store, *args, **kwargs))

    def derive_many(self, items: list[Derivation]) -> list[Context]:
        return self._run(derive_many(self.store, items))

    def flush(self) -> Replay:
        """Send what waits now (over HTTP, what is queued first), whatever the retry backoff; what
        the store still cannot take stays in the spool (`remaining`)."""
        return self._run(self.store.replay())

    def close(self) -> None:
        """Over HTTP, send what is queued and try the spool once more; then let go."""
        self._run(self.store.aclose())
        if self._database is not None:
            self._run(self._database.close())
        with self._runner_lock:
            self._runner.close()

    def _run(self, call: Coroutine[Any, Any, Result]) -> Result:
        with self._runner_lock:
            return self._runner.run(call)

    def __enter__(self) -> "SyncLineage":
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
