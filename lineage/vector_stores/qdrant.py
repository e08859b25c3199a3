"""A Qdrant collection, through qdrant-client: in local mode (`path`, no server) or at a server
(`url`, with `api_key`). A payload field (`id_field`, dotted for a nested one such as LangChain's
`metadata.context_id`) holds the lineage context_id of the chunk or embedding a point embeds;
several points may share one.

Local mode locks its folder for one client at a time: a pipeline holding it open makes forget
fail on this store (and a later run finish it)."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

if TYPE_CHECKING:
    from qdrant_client import AsyncQdrantClient
    from qdrant_client.models import Filter

PAGE = 1000


class QdrantStore(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["qdrant"]
    tenant: str = Field(min_length=1)
    name: str = Field(min_length=1)
    path: Path | None = Field(default=None, description="local mode: the client's folder")
    url: str | None = Field(default=None, description="a Qdrant server")
    api_key: SecretStr | None = None
    collection: str = Field(min_length=1)
    id_field: str = Field(default="context_id", pattern=r"^[^.\s]+(\.[^.\s]+)*$")

    @model_validator(mode="after")
    def one_place(self) -> "QdrantStore":
        if (self.path is None) == (self.url is None):
            raise ValueError("give either path (local mode) or url (a server), not both")
        if self.api_key is not None and self.url is None:
            raise ValueError("api_key goes with url; local mode has no key")
        return self

    def target(self) -> str:
        where = f"path {self.path}" if self.path is not None else f"url {self.url}"
        return f"qdrant {where} collection {self.collection} field {self.id_field}"

    def secrets(self) -> list[str]:
        return [self.api_key.get_secret_value()] if self.api_key is not None else []

    @asynccontextmanager
    async def _client(self) -> AsyncIterator["AsyncQdrantClient"]:
        try:
            from qdrant_client import AsyncQdrantClient
        except ImportError as exc:
            raise RuntimeError(
                "qdrant-client is not installed: pip install 'lineage[qdrant]'"
            ) from exc
        if self.path is not None:
            client = AsyncQdrantClient(path=str(self.path))
        else:
            key = self.api_key.get_secret_value() if self.api_key is not None else None
            client = AsyncQdrantClient(url=self.url, api_key=key)
        try:
            yield client
        finally:
            await client.close()

    def _keyed_by(self, ids: list[str]) -> "Filter":
        from qdrant_client import models

        return models.Filter(
            must=[models.FieldCondition(key=self.id_field, match=models.MatchAny(any=ids))]
        )

    async def present(self, ids: list[str]) -> set[str]:
        found: set[str] = set()
        offset: Any = None
        async with self._client() as client:
            while True:
                points, offset = await client.scroll(
                    self.collection,
                    scroll_filter=self._keyed_by(ids),
                    limit=PAGE,
                    offset=offset,
                    with_payload=[self.id_field],
                    with_vectors=False,
                )
                found |= {self._id_of(point.payload or {}) for point in points}
                if offset is None:
                    return found & set(ids)

    def _id_of(self, payload: dict[str, Any]) -> str:
        value: Any = payload
        for part in self.id_field.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value if isinstance(value, str) else ""

    async def delete(self, ids: list[str]) -> None:
        from qdrant_client import models

        async with self._client() as client:
            await client.delete(
                self.collection,
                points_selector=models.FilterSelector(filter=self._keyed_by(ids)),
                wait=True,
            )
