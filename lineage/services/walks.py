"""The graph questions, answered by the named queries in sql/. The API, the CLI and the demo
all come through here, so each answers from the same SQL file."""

import json
from collections import Counter
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import Field

from lineage.core.body import Body
from lineage.core.errors import BadParameter, NotFound
from lineage.core.record import KINDS
from lineage.db.database import Database
from lineage.interop.layers import request_layers
from lineage.services import reads
from lineage.settings import Settings

# Each impact question (named by the parameter that picks its starting records; `stale` by
# source_uri, from the revisions that are no longer the newest) and the file that answers it.
IMPACT_QUERIES = {
    "context_ids": "blast_radius",
    "source_uri": "blast_radius_by_source",
    "transform_version": "invalidate_by_transform_version",
    "index_snapshot": "invalidate_by_index_snapshot",
    "embedding_model": "invalidate_by_embedding_model",
    "stale": "stale_sources",
}
# A blast radius as ids, kinds and depths, for listings that need no record: no record is read
# but those it starts from.
IMPACT_ID_QUERIES = {
    "context_ids": "blast_radius_ids",
    "source_uri": "blast_radius_ids_by_source",
    "transform_version": "invalidate_ids_by_transform_version",
    "index_snapshot": "invalidate_ids_by_index_snapshot",
    "embedding_model": "invalidate_ids_by_embedding_model",
}


def truncated_reason(truncated: bool, expired: bool) -> str | None:
    """Why a walk's answer is incomplete: `retention` when it reached records the retention
    period dropped (or, for the questions that cannot see what is missing, when the tenant has
    expired records), `max_depth` when records lie deeper than asked; None when complete."""
    if expired:
        return "retention"
    return "max_depth" if truncated else None


@dataclass
class Walk:
    nodes: list[dict[str, Any]]
    truncated: bool
    truncated_reason: str | None = None

    def edges(self) -> list[dict[str, str]]:
        """child -> parent, for every parent the walk reached."""
        reached = {node["context_id"] for node in self.nodes}
        return [
            {"child": node["context_id"], "parent": parent}
            for node in self.nodes
            for parent in node["parent_ids"]
            if parent in reached
        ]


class ImpactSummary(Body):
    total: int
    counts_by_kind: dict[str, int]
    truncated: bool
    truncated_reason: str | None = Field(
        default=None, description="max_depth or retention; null when complete"
    )


@dataclass
class ImpactTally:
    """A walk's nodes counted as they go by, for the summary that closes its answer."""

    counts: Counter[str] = field(default_factory=Counter)
    truncated: bool = False
    expired: bool = False

    def add(self, node: dict[str, Any]) -> None:
        self.counts[node["kind"]] += 1
        self.truncated = self.truncated or bool(node["truncated"])
        self.expired = self.expired or bool(node.get("expired"))

    def summary(self) -> ImpactSummary:
        return ImpactSummary(
            total=sum(self.counts.values()),
            counts_by_kind=dict(sorted(self.counts.items())),
            truncated=self.truncated or self.expired,
            truncated_reason=truncated_reason(self.truncated, self.expired),
        )


def check_depth(settings: Settings, max_depth: int | None) -> int:
    depth = settings.default_max_depth if max_depth is None else max_depth
    if not 0 <= depth <= settings.max_depth_limit:
        raise BadParameter(f"max_depth must be between 0 and {settings.max_depth_limit}")
    return depth


def check_kind(kind: str) -> str:
    if kind not in KINDS | {"any", "all"}:
        raise BadParameter(
            f"kind {kind!r} is not a kind; use one of {', '.join(sorted(KINDS))}, "
            "'any' (all but verdict and tombstone) or 'all'"
        )
    return kind


async def walk_back(
    database: Database,
    settings: Settings,
    tenant_id: str,
    context_id: str,
    max_depth: int | None,
    layers: bool = False,
) -> Walk:
    """The walk-back, read from the JSON the database writes of its records (in less time
    than making nodes of the rows); with `layers`, each hop carries its `request` layer
    (add_layers)."""
    records = await walk_back_json(database, settings, tenant_id, context_id, max_depth)
    walk = walk_from_json(context_id, records)
    if layers:
        await add_layers(database, settings, tenant_id, walk.nodes)
    return walk


async def walk_back_json(
    database: Database, settings: Settings, tenant_id: str, context_id: str, max_depth: int | None
) -> bytes:
    """The walk-back's records as the JSON array the database writes (reads.fetch_records_json),
    for a worker process to decode: a walk of thousands decoded on the event loop held it for
    tens of milliseconds a time, and other tenants' requests waited. NotFound for an unknown
    record."""
    depth = check_depth(settings, max_depth)
    values = {"tenant_id": tenant_id, "context_id": context_id, "max_depth": depth}
    records = await reads.fetch_records_json(database, settings, "walk_back", **values)
    if records is None:
        raise NotFound(f"no context {context_id}")
    return records


def walk_from_json(context_id: str, records: bytes) -> Walk:
    """The Walk of walk_back_json's records."""
    return _walk(context_id, records_from_json(records))


def records_from_json(records: bytes) -> list[dict[str, Any]]:
    """Records as the database wrote them, a JSON array, read by orjson in half of json's
    time; by json where orjson refuses it (a number past a double's range, nesting past 1,024
    levels) or may not have read it exactly (it reads an integer past 64 bits as a float)."""
    try:
        decoded: list[dict[str, Any]] = orjson.loads(records)
    except orjson.JSONDecodeError:
        return list(json.loads(records))
    if not all(_exact(record["attributes"]) for record in decoded):
        return list(json.loads(records))
    return decoded


def _exact(value: Any) -> bool:
    """Whether orjson read these values as json does: no float past 2**63 (json would have read
    an integer there exactly, orjson a float)."""
    if isinstance(value, float):
        return abs(value) < 2**63
    if isinstance(value, dict):
        return all(_exact(item) for item in value.values())
    if isinstance(value, list):
        return all(_exact(item) for item in value)
    return True


async def add_layers(
    database: Database, settings: Settings, tenant_id: str, nodes: list[dict[str, Any]]
) -> None:
    """Give each node its `request` layer, service and transport nested in it, read from the
    stored spans of the walk's traces in one query (lineage.interop.layers); null without."""
    traced = [(n["context_id"], n["trace_id"], n["attributes"] or {}) for n in nodes]
    async with database.tenant(tenant_id, statement_timeout_ms=settings.statement_timeout_ms) as tx:
        found = await request_layers(tx, traced, settings.max_spans_per_trace)
    for node in nodes:
        node["request"] = found[node["context_id"]]


def _walk(context_id: str, nodes: list[dict[str, Any]]) -> Walk:
    if not nodes:
        raise NotFound(f"no context {context_id}")
    deeper = any(node["truncated"] for node in nodes)
    expired = any(node["expired"] for node in nodes)
    return Walk(nodes, deeper or expired, truncated_reason(deeper, expired))


async def suspicious_hops(
    database: Database, settings: Settings, tenant_id: str, context_id: str, max_depth: int | None
) -> list[dict[str, Any]]:
    """The suspect hops of the record's walk-back; NotFound for an unknown record."""
    _, hops = await marked_walk_back(database, settings, tenant_id, context_id, max_depth, 0)
    return hops


async def marked_walk_back(
    database: Database,
    settings: Settings,
    tenant_id: str,
    context_id: str,
    max_depth: int | None,
    walk_depth: int | None = None,
    layers: bool = False,
) -> tuple[Walk, list[dict[str, Any]]]:
    """The walk-back (to `walk_depth`, default `max_depth`) and its suspect hops (to
    `max_depth`), in one transaction; with `layers`, each hop's request layer (add_layers).
    NotFound for an unknown record."""
    depth = check_depth(settings, max_depth)
    walked = depth if walk_depth is None else check_depth(settings, walk_depth)
    start = {"context_id": context_id}
    nodes, hops = await reads.run_together(
        database,
        settings,
        tenant_id,
        ("walk_back", start | {"max_depth": walked}),
        ("suspicious_hops", start | {"max_depth": depth}),
    )
    walk = _walk(context_id, nodes)
    if layers:
        await add_layers(database, settings, tenant_id, walk.nodes)
    return walk, hops


async def require_context(
    database: Database, settings: Settings, tenant_id: str, context_id: str
) -> None:
    """NotFound unless the tenant has the record (a walk-back that stops at it)."""
    await walk_back(database, settings, tenant_id, context_id, 0)


async def impact_nodes(
    database: Database, settings: Settings, question: str, **values: Any
) -> list[dict[str, Any]]:
    """An impact question's records, in memory (the CLI's listing)."""
    return await reads.run(database, settings, IMPACT_QUERIES[question], **values)


def impact_json(
    database: Database, settings: Settings, question: str, **values: Any
) -> AsyncGenerator[tuple[dict[str, Any], bytes], None]:
    """An impact question's records as the database writes their JSON, row by row."""
    return reads.record_json(database, settings, IMPACT_QUERIES[question], **values)


def impact_ids(
    database: Database, settings: Settings, question: str, **values: Any
) -> AsyncGenerator[dict[str, Any], None]:
    """An impact question's ids, kinds and depths, row by row."""
    return reads.stream(database, settings, IMPACT_ID_QUERIES[question], **values)


def impact_id_json(
    database: Database, settings: Settings, question: str, **values: Any
) -> AsyncGenerator[list[tuple[dict[str, Any], bytes]], None]:
    """An impact question's ids as the JSON objects of its ids file that the database writes,
    with what the file's summary counts, a batch at a time (reads.id_json)."""
    return reads.id_json(database, settings, IMPACT_ID_QUERIES[question], **values)


def impact_id_file(
    database: Database, settings: Settings, question: str, **values: Any
) -> AsyncGenerator[bytes, None]:
    """An impact question's ids as CSV lines that the server writes (reads.copy_id_file)."""
    return reads.copy_id_file(database, settings, IMPACT_ID_QUERIES[question], **values)
