"""A pgvector table in any PostgreSQL: its `id_column` (text) holds the lineage context_id of the
chunk or embedding whose vector the row stores.

Its two statements are written here, not in lineage/sql: they run on the operator's database,
against a table and column the registry names, and those names are only known at run time
(checked against IDENTIFIER and double-quoted, so they cannot carry SQL)."""

from typing import Literal
from urllib.parse import urlsplit

import asyncpg
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_$]{0,62}"


class PgvectorStore(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["pgvector"]
    tenant: str = Field(min_length=1)
    name: str = Field(min_length=1)
    dsn: SecretStr = Field(description="postgresql://user:password@host:port/database")
    table: str = Field(
        pattern=rf"^{IDENTIFIER}(\.{IDENTIFIER})?$",
        description="the table, schema-qualified or not, as stored (case matters)",
    )
    id_column: str = Field(default="id", pattern=rf"^{IDENTIFIER}$")

    @field_validator("dsn")
    @classmethod
    def is_url(cls, dsn: SecretStr) -> SecretStr:
        if urlsplit(dsn.get_secret_value()).scheme not in ("postgresql", "postgres"):
            raise ValueError("a postgresql:// URL is needed")
        return dsn

    def target(self) -> str:
        url = urlsplit(self.dsn.get_secret_value())
        user = f"{url.username}@" if url.username else ""
        port = f":{url.port}" if url.port else ""
        return (
            f"postgresql://{user}{url.hostname or ''}{port}{url.path} {self.table}.{self.id_column}"
        )

    def secrets(self) -> list[str]:
        password = urlsplit(self.dsn.get_secret_value()).password
        return [password] if password else []

    def _names(self) -> tuple[str, str]:
        table = ".".join(f'"{part}"' for part in self.table.split("."))
        return table, f'"{self.id_column}"'

    async def present(self, ids: list[str]) -> set[str]:
        table, column = self._names()
        connection = await asyncpg.connect(self.dsn.get_secret_value())
        try:
            rows = await connection.fetch(
                f"SELECT DISTINCT {column} FROM {table} WHERE {column} = ANY ($1::text[])", ids
            )
        finally:
            await connection.close()
        return {row[0] for row in rows}

    async def delete(self, ids: list[str]) -> None:
        table, column = self._names()
        connection = await asyncpg.connect(self.dsn.get_secret_value())
        try:
            await connection.execute(f"DELETE FROM {table} WHERE {column} = ANY ($1::text[])", ids)
        finally:
            await connection.close()
