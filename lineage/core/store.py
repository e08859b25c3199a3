"""The store contract: the one interface derive() and the SDK's helpers write through, with
every verb they need, so that no caller asks which store it holds."""

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from lineage.core.queries import QueryIn
from lineage.core.record import ContextRecord, NewContext


class Appended(NamedTuple):
    record: ContextRecord  # as stored: for a replay, the earlier record
    created: bool
    # Kept locally, not stored yet: spooled while the store is down (lineage.store.spool), or
    # queued for a thread to send (lineage.store.background).
    spooled: bool = False


class Store(Protocol):
    tenant_id: str

    async def append(
        self, proposals: Sequence[NewContext], *, texts: Mapping[str, str] | None = None
    ) -> list[Appended]:
        """Write all in one transaction, or none: raises InvalidRecord or Conflict. `texts`
        (context id -> text, opt-in capture) are kept with the records in the same
        transaction, or the append is refused (InvalidRecord `capture_off`, BadParameter where
        the store cannot keep text)."""
        ...

    async def get(self, context_id: str) -> ContextRecord | None: ...

    async def text_hash_key(self) -> bytes | None:
        """The tenant's key for query, claim and answer hashes, where the store reaches its
        database; None where it does not (the service keys those hashes itself)."""
        ...

    async def record_query(self, query: QueryIn) -> dict[str, Any]:
        """A gateway's query, retrieval and answer as three records (lineage.core.gateway)."""
        ...
