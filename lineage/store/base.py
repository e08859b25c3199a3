"""The one interface derive() writes through."""

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from lineage.core.record import ContextRecord, NewContext


class Appended(NamedTuple):
    record: ContextRecord  # as stored: for a replay, the earlier record
    created: bool
    spooled: bool = (
        False  # kept locally while the store is down (lineage.store.spool): not stored yet
    )


class Store(Protocol):
    tenant_id: str

    async def append(self, proposals: Sequence[NewContext]) -> list[Appended]:
        """Write all in one transaction, or none: raises InvalidRecord or Conflict."""
        ...

    async def get(self, context_id: str) -> ContextRecord | None: ...
