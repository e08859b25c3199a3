"""Where records are written: one interface, a Postgres store and an HTTP store."""

from lineage.core.store import Appended, Store
from lineage.store.http import HttpStore
from lineage.store.postgres import PostgresStore

__all__ = ["Appended", "HttpStore", "PostgresStore", "Store"]
