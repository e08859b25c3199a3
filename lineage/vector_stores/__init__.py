"""The vector stores a tenant's vectors live in, as forget reaches them (docs/privacy.md,
"Vector stores").

The operator registers them in one TOML file (`LINEAGE_VECTOR_STORES_FILE`, mode 0600: it holds
their credentials), one `[[store]]` table each, with `tenant`, `name`, `kind` and the kind's
fields. A store's id column or payload field holds the lineage context_id of the `chunk` a
vector embeds, or of the `embedding` record that made it; forget deletes every vector keyed by a
chunk or embedding id in its radius.

Registered by the operator, not over the API: forget connects and deletes with the credentials
given, so naming a target is the operator's decision (a tenant's admin key could otherwise aim
the server's deletes at any host or folder it reaches), and credentials stay out of the
database, its backups and bundles. Answers and logs show a store's `target()`, never its
credentials.

A new kind of store is a pydantic model with `kind`, `tenant` and `name` that implements
`VectorStore`, added to `StoreEntry`.
"""

import stat
import tomllib
from collections import Counter
from typing import Annotated, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lineage.core.errors import VectorStoreRegistryError
from lineage.settings import Settings
from lineage.vector_stores.pgvector import PgvectorStore
from lineage.vector_stores.qdrant import QdrantStore

__all__ = ["VectorStore", "registered"]

SETTING = "the vector store registry (LINEAGE_VECTOR_STORES_FILE)"


class VectorStore(Protocol):
    """One registered store: which of some lineage ids have vectors, and delete theirs."""

    @property
    def kind(self) -> str: ...

    @property
    def name(self) -> str: ...

    def target(self) -> str:
        """Where the vectors are, without credentials: safe in answers, records and logs."""

    def secrets(self) -> list[str]:
        """The credentials, to scrub from a failing store's error message."""

    async def present(self, ids: list[str]) -> set[str]:
        """Those of `ids` that key at least one vector in the store."""

    async def delete(self, ids: list[str]) -> None:
        """Delete every vector keyed by one of `ids`."""


StoreEntry = Annotated[PgvectorStore | QdrantStore, Field(discriminator="kind")]


class Registry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    store: list[StoreEntry] = []


def registered(settings: Settings, tenant_id: str) -> list[VectorStore]:
    """The tenant's stores, in the file's order; none when no registry is set."""
    path = settings.vector_stores_file
    if path is None:
        return []
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise VectorStoreRegistryError(f"{SETTING} cannot be read: {exc.strerror}") from exc
    if mode & 0o077:
        raise VectorStoreRegistryError(
            f"{SETTING} is open to other users (mode {mode:o}) but holds the stores' "
            "credentials: chmod 600 it"
        )
    try:
        registry = Registry.model_validate(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise VectorStoreRegistryError(f"{SETTING} is not valid TOML: {exc}") from exc
    except ValidationError as exc:
        # Without the input values: they may be credentials.
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors(include_input=False, include_url=False)
        )
        raise VectorStoreRegistryError(f"{SETTING} is invalid: {problems}") from None
    twice = [
        f"{tenant}/{name}"
        for (tenant, name), count in Counter((s.tenant, s.name) for s in registry.store).items()
        if count > 1
    ]
    if twice:
        raise VectorStoreRegistryError(
            f"{SETTING} names a store twice for one tenant: {', '.join(sorted(twice))}; "
            "give each store of a tenant its own name"
        )
    return [store for store in registry.store if store.tenant == tenant_id]
