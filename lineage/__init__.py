"""lineage: record the causes behind every unit of context, and walk them back."""

from lineage.core.derive import Context, Derivation, derive, derive_many, render_for_prompt
from lineage.core.errors import (
    BadParameter,
    Conflict,
    InvalidRecord,
    LineageError,
    NotFound,
    StoreUnavailable,
    WalkTimeout,
)
from lineage.core.queries import record_query
from lineage.core.record import ContextRecord, NewContext
from lineage.store import HttpStore, PostgresStore, Store
from lineage.store.spool import SpoolingStore

__all__ = [
    "BadParameter",
    "Conflict",
    "Context",
    "ContextRecord",
    "Derivation",
    "HttpStore",
    "InvalidRecord",
    "LineageError",
    "NewContext",
    "NotFound",
    "PostgresStore",
    "SpoolingStore",
    "Store",
    "StoreUnavailable",
    "WalkTimeout",
    "derive",
    "derive_many",
    "record_query",
    "render_for_prompt",
]
