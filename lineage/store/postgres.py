"""The store that talks to Postgres directly: each call in a tenant transaction of its own."""

from collections.abc import Mapping, Sequence
from typing import Any

from lineage.core import DEFAULT_TENANT
from lineage.core.queries import QueryIn
from lineage.core.record import ContextRecord, NewContext
from lineage.core.store import Appended
from lineage.db.database import Database
from lineage.db.errors import outage_as_unavailable
from lineage.services.transaction_store import TransactionStore


class PostgresStore:
    """Writes and reads one tenant's records through a Database it does not own, each call in
    its own transaction, signed with the database's keyring."""

    def __init__(self, database: Database, tenant_id: str = DEFAULT_TENANT) -> None:
        self.database = database
        self.tenant_id = tenant_id

    async def append(
        self, proposals: Sequence[NewContext], *, texts: Mapping[str, str] | None = None
    ) -> list[Appended]:
        with outage_as_unavailable():
            async with self.database.tenant(self.tenant_id) as tx:
                return await TransactionStore(tx).append(proposals, texts=texts)

    async def get(self, context_id: str) -> ContextRecord | None:
        with outage_as_unavailable():
            async with self.database.tenant(self.tenant_id) as tx:
                return await TransactionStore(tx).get(context_id)

    async def text_hash_key(self) -> bytes:
        with outage_as_unavailable():
            async with self.database.tenant(self.tenant_id) as tx:
                return await TransactionStore(tx).text_hash_key()

    async def record_query(self, query: QueryIn) -> dict[str, Any]:
        async with self.database.tenant(self.tenant_id) as tx:
            return await TransactionStore(tx).record_query(query)
