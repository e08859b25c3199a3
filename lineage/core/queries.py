"""A gateway's query: what one call per query records (lineage.core.gateway sends it, the
service's POST /v1/queries and lineage.services.queries store it)."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lineage.core.record import ID_PATTERN

ROLES = ("query", "retrieval", "answer")
MAX_EVIDENCE = 1000


class Evidence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    context_id: str = Field(min_length=1, max_length=128)
    score: float | None = Field(default=None, allow_inf_nan=False)
    backend: str | None = Field(default=None, max_length=256)


class QueryIn(BaseModel):
    """A query, how it was routed, what it retrieved, and what the model answered. Texts are
    hashed (query and answer with the tenant's key) and never stored; send a hash instead of a
    text to keep the text with you."""

    model_config = ConfigDict(extra="forbid")

    request_id: str = Field(min_length=1, max_length=100, pattern=ID_PATTERN.pattern)
    query: str | None = None
    query_hash: str | None = None
    routing: dict[str, Any] = Field(default_factory=dict, description="the routing decision")
    backends: list[str] = Field(default_factory=list, max_length=64)
    evidence: list[Evidence] = Field(default_factory=list, max_length=MAX_EVIDENCE)
    model: str | None = Field(default=None, max_length=256)
    answer: str | None = None
    answer_hash: str | None = None
    produced_by: str | None = None
    index_snapshot: str | None = None
    source_uri: str | None = Field(default=None, description="default: request:<request_id>")
    trace_id: str | None = None

    @model_validator(mode="after")
    def text_or_hash(self) -> "QueryIn":
        for name in ("query", "answer"):
            if (getattr(self, name) is None) == (getattr(self, f"{name}_hash") is None):
                raise ValueError(f"send exactly one of {name} or {name}_hash")
        return self

    def record_id(self, role: str) -> str:
        return f"req:{self.request_id}:{role}"
