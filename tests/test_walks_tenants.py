"""Every named read query is confined to its tenant: the same ids in two tenants answer each
tenant's own records."""

import dataclasses
from typing import Any

import asyncpg
import pytest

from lineage import db
from lineage.core.derive import Derivation, derive_many
from lineage.core.errors import NotFound
from lineage.db.database import Database
from lineage.db.named_sql import QUERIES
from lineage.services import reads, walks
from lineage.services.demo import (
    ANSWER_ID,
    CONTRACTOR_POLICY,
    EMPLOYEE_POLICY,
    INCIDENT,
    TRACE_ID,
    load_incident,
)
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.walks_helpers import ALL_DEMO_IDS, EXPECTED, SAMPLE_VALUES

# --- tenant confinement ------------------------------------------------------------------------


def other_incident() -> list[Derivation]:
    """The demo ids again with other text, a different shape and an employee-policy revision."""
    items = []
    for item in INCIDENT:
        if item.context_id in {"doc_contractors_v2", "chunk_58"}:
            continue  # in "other" the contractor policy was never revised...
        changes: dict[str, Any] = {
            "text": f"[other] {item.text}",
            "attributes": {**item.attributes, "tenant": "other"},
        }
        if item.context_id == "chunk_17":  # ...and chunker@1.4 is the newest chunker
            changes |= {"version": "1.4", "index_snapshot": "idx_2026_08_01"}
        items.append(dataclasses.replace(item, **changes))
    # ...but the employee policy was revised after everything else.
    revised = Derivation(
        [], "[other] Employee leave policy, revised.", "document", "loader", "1.2.0",
        source_uri=EMPLOYEE_POLICY, context_id="doc_employee_leave_v2",
        attributes={"tenant": "other"},
    )  # fmt: skip
    return [*items, revised]


async def read_everything(database: Database, settings: Settings, tenant: str) -> dict[str, Any]:
    """Every named read query for one tenant, through reads.run."""
    common: dict[str, Any] = {"tenant_id": tenant, "kind": "all", "max_depth": 20}
    asks: dict[str, dict[str, Any]] = {
        "walk_back": {"context_id": ANSWER_ID},
        "blast_radius": {"context_ids": ["doc_contractors_v1"]},
        "blast_radius_by_source": {"source_uri": CONTRACTOR_POLICY},
        "invalidate_by_transform_version": {"transform_version": "chunker@1.4"},
        "invalidate_by_index_snapshot": {"index_snapshot": "idx_2026_08_01"},
        "stale_sources": {"source_uri": "any"},
        "trace_contexts": {"trace_id": TRACE_ID},
        "list_contexts": {"page_size": 1000, "kind": "any"},  # its match-all is 'any'
        "suspicious_hops": {"context_id": ANSWER_ID},
        "get_contexts": {"context_ids": sorted(ALL_DEMO_IDS | {"doc_employee_leave_v2"})},
    }
    results: dict[str, Any] = {}
    for name, values in asks.items():
        wanted = set(QUERIES[name].parameters)
        given = {k: v for k, v in (SAMPLE_VALUES | common | values).items() if k in wanted}
        results[name] = await reads.run(database, settings, name, **given)
    return results


async def test_every_read_query_is_confined_to_its_tenant(
    store: PostgresStore,
    database: Database,
    settings: Settings,
    owner: asyncpg.Connection,
) -> None:
    await db.fetch(owner, "tenant_create", tenant_id="other")  # with its text hash key
    other_store = PostgresStore(database, "other")
    mine = {c.context_id: c.record.content_hash for c in await load_incident(store)}
    # One call per record, as load_incident does, so each revision has its own created_at.
    loaded = [(await derive_many(other_store, [item]))[0] for item in other_incident()]
    theirs = {c.context_id: c.record.content_hash for c in loaded}
    hashes = {"default": mine, "other": theirs}
    assert not set(mine.values()) & set(theirs.values())
    assert set(EXPECTED["default"]) <= set(QUERIES)

    for tenant in ("default", "other"):
        results = await read_everything(database, settings, tenant)
        assert set(results) == set(EXPECTED[tenant])
        for name, rows in results.items():
            if name == "suspicious_hops":
                got = {(row["context_id"], row["reason"]) for row in rows}
                assert got == EXPECTED[tenant][name], (tenant, name)
                continue
            ids = [row["context_id"] for row in rows]
            assert len(ids) == len(set(ids)), (tenant, name)
            assert set(ids) == EXPECTED[tenant][name], (tenant, name)
            # Same ids in both tenants: only the hash and attributes tell whose row it is.
            assert all(row["content_hash"] == hashes[tenant][row["context_id"]] for row in rows), (
                tenant,
                name,
            )
            marked = {row["attributes"].get("tenant") for row in rows}
            assert marked == ({"other"} if tenant == "other" else {None}), (tenant, name)

    # An id only "other" holds is unknown to "default".
    with pytest.raises(NotFound):
        await walks.walk_back(database, settings, "default", "doc_employee_leave_v2", 20)
    assert (await PostgresStore(database).get("doc_employee_leave_v2")) is None
