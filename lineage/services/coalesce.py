"""Single-record appends of one process joined into one transaction per tenant: while a
tenant's transaction is being written, the appends that arrive wait and go together in the
next one. A flood of single records then costs about what their batch costs (one BEGIN, one
tenant check, one insert statement and one commit for all), and an idle service writes each
at once, with no added wait.

Each request still gets its own answer. A batch refused for one caller's mistake (a missing
parent, a conflicting replay, an id sent twice) is written again record by record, so that
only that record's request is refused; an outage fails every waiting request, as it would
have failed each."""

import asyncio
import contextvars

from lineage.core.errors import LineageError
from lineage.core.record import NewContext
from lineage.core.store import Appended
from lineage.db.database import Database
from lineage.services import appends

# A batch's records wait for each other's commit: past this many, the rest go in the next.
MAX_RECORDS = 500

Waiting = tuple[NewContext, asyncio.Future[Appended]]


class AppendCoalescer:
    def __init__(self, max_records: int = MAX_RECORDS) -> None:
        self.max_records = max_records
        self._waiting: dict[str, list[Waiting]] = {}
        self._writers: dict[str, asyncio.Task[None]] = {}

    async def append(self, database: Database, tenant_id: str, proposal: NewContext) -> Appended:
        """The record appended (or found: an identical replay), once its transaction commits."""
        answer: asyncio.Future[Appended] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant_id, []).append((proposal, answer))
        if tenant_id not in self._writers:
            # In a context of its own: the audit row of the request that starts it is not the
            # batch's to write (a request's own is written when it ends, lineage.api.deps).
            self._writers[tenant_id] = asyncio.create_task(
                self._write_all(database, tenant_id), context=contextvars.Context()
            )
        return await answer  # a request that goes away leaves its record to be written

    async def _write_all(self, database: Database, tenant_id: str) -> None:
        try:
            while batch := self._take(tenant_id):
                await self._write(database, tenant_id, batch)
        finally:
            del self._writers[tenant_id]

    def _take(self, tenant_id: str) -> list[Waiting]:
        waiting = self._waiting.pop(tenant_id, [])
        if len(waiting) > self.max_records:
            self._waiting[tenant_id] = waiting[self.max_records :]
        return waiting[: self.max_records]

    async def _write(self, database: Database, tenant_id: str, batch: list[Waiting]) -> None:
        try:
            appended = await appends.append(database, tenant_id, [p for p, _ in batch])
        except Exception as exc:
            if len(batch) > 1 and isinstance(exc, LineageError) and exc.status < 500:
                for waiting in batch:  # one caller's mistake: only its request is refused
                    await self._write(database, tenant_id, [waiting])
                return
            for _, answer in batch:
                if not answer.done():
                    answer.set_exception(exc)
            return
        for (_, answer), result in zip(batch, appended, strict=True):
            if not answer.done():
                answer.set_result(result)
