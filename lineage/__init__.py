"""lineage: record the causes behind every unit of context, and walk them back."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from lineage.core.gateway import record_query
    from lineage.core.record import ContextRecord, NewContext
    from lineage.store import HttpStore, PostgresStore, Store
    from lineage.store.spool import SpoolingStore

# Imported on first use, so that `lineage --help` does not load the SDK, asyncpg and pydantic.
_HOMES = {
    "lineage.core.derive": ("Context", "Derivation", "derive", "derive_many", "render_for_prompt"),
    "lineage.core.errors": (
        "BadParameter", "Conflict", "InvalidRecord", "LineageError", "NotFound",
        "StoreUnavailable", "WalkTimeout",
    ),
    "lineage.core.gateway": ("record_query",),
    "lineage.core.record": ("ContextRecord", "NewContext"),
    "lineage.store": ("HttpStore", "PostgresStore", "Store"),
    "lineage.store.spool": ("SpoolingStore",),
}  # fmt: skip
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    if name not in _HOME_OF:
        raise AttributeError(f"module 'lineage' has no attribute {name!r}")
    value = getattr(import_module(_HOME_OF[name]), name)
    globals()[name] = value
    return value


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
