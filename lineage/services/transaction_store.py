"""derive() inside a transaction a service opened: the Store of an open tenant transaction."""

from collections.abc import Mapping, Sequence
from typing import Any

from lineage.core.queries import QueryIn
from lineage.core.record import ContextRecord, NewContext
from lineage.core.store import Appended
from lineage.db.database import Transaction
from lineage.services import privacy, queries
from lineage.services.appends import append_records
from lineage.services.records import get_records


class TransactionStore:
    """The Store of an open tenant transaction: derive() appends inside it, and the caller's
    commit or rollback takes its records with the rest of the transaction's work."""

    def __init__(self, tx: Transaction) -> None:
        self.tx = tx
        self.tenant_id = tx.tenant_id

    async def append(
        self, proposals: Sequence[NewContext], *, texts: Mapping[str, str] | None = None
    ) -> list[Appended]:
        return await append_records(self.tx, proposals, texts=texts)

    async def get(self, context_id: str) -> ContextRecord | None:
        return (await get_records(self.tx, [context_id])).get(context_id)

    async def text_hash_key(self) -> bytes:
        return await privacy.text_hash_key(self.tx)

    async def record_query(self, query: QueryIn) -> dict[str, Any]:
        return await queries.append_query(self.tx, query)
