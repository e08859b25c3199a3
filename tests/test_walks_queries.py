"""The named-query files: each is loaded and named in the package, and each prepares and runs
on an empty database."""

import ast
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

import lineage
from lineage import db
from lineage.db.named_sql import QUERIES, SQL_DIR, load, parse
from tests.walks_helpers import SAMPLE_VALUES

# --- the named-query files ---------------------------------------------------------------------


def package_string_literals() -> set[str]:
    found: set[str] = set()
    for path in Path(lineage.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


def test_every_sql_file_is_loaded_and_named_in_the_package() -> None:
    stems = {path.stem for path in SQL_DIR.glob("*.sql")}
    assert set(QUERIES) == stems
    assert set(load()) == stems
    unused = stems - package_string_literals()
    assert unused == set(), f"sql files no Python code names: {sorted(unused)}"


# The writes get one real row each (rolled back); their arrays must line up.
WRITE_VALUES: dict[str, dict[str, Any]] = {
    "append_records": {
        "context_ids": ["sample_doc"],
        "is_uuids": [False],
        "parent_id_lists": ["{}"],
        "kinds": ["document"],
        "source_uris": ["s3://sample.md"],
        "content_hashes": ["sha256:" + "0" * 64],
        "transforms": ["loader"],
        "transform_versions": ["loader@1"],
        "version_keys": ["k"],
        "produced_bys": [None],
        "index_snapshots": [None],
        "trace_ids": [None],
        "created_ats": [datetime.now(UTC)],
        "attribute_docs": ["{}"],
        "key_ids": ["k"],
        "signatures": [b"s"],
        "keys": ["transform_version:loader@1", "source:s3://sample.md"],
        "upstream_key_lists": ["{1}"],
        "upstream_depth_lists": ["{0}"],
        "root_source_lists": ["{2}"],
        "root_depth_lists": ["{0}"],
        "posting_keys": [1, 2],
        "posting_kinds": ["document"] * 2,
        "posting_depths": [0, 0],
        "posting_created_ats": [datetime.now(UTC)] * 2,
        "posting_uuid_lists": [None, None],
        "posting_id_lists": ['{"sample_doc"}'] * 2,
    },
    "partitions_add": {"from_time": datetime.now(UTC), "through": datetime.now(UTC)},
    "retention_apply": {"now": datetime.now(UTC)},
    "partitions_shape": {"now": datetime.now(UTC)},
    "retention_policy_set": {"keep_months": 0},
    "audit_append": {"key_id": "k", "action": "walk", "target": "t", "detail": {}, "at": None},
    "audit_list": {"limit": 10},
    "operator_audit_list": {"limit": 10},
    "bundle_records": {"tree_size": 10},
    "bundle_import_settings": {
        **dict.fromkeys(
            ("capture_source_text", "capture_query_text", "capture_answer_text"), False
        ),
        "text_hash_key": bytes(32),
    },
    # NULL retires no key (the sample tenant's own one is held by its settings' foreign key).
    "bundle_retire_text_keys": {"text_hash_key": None},
    "bundle_import_texts": {"texts": [], "captured_ats": []},
    "bundle_import_expiry": {"expired_before": datetime(2024, 1, 1, tzinfo=UTC)},
    "bundle_import_tombstone": {
        "parent_ids": ["nope"],
        "kind": "tombstone",
        "content_hash": "sha256:nope",
        "transform": "forget",
        "created_at": datetime(2024, 1, 1, tzinfo=UTC),
        "attributes": "{}",
        "key_id": "k",
        "signature": b"s",
    },
    "key_create": {"key_id": "k", "scope": "read", "key_hash": b"h", "label": ""},
    "key_revoke": {"key_id": "k"},
    "key_lookup": {"key_id": "k"},
    # The verifiable log's queries (tests/test_log.py runs them for real).
    "log_queued_records": {"batch_size": 10},
    "log_lock_head": {},
    "log_advance": {
        "old_size": 0,
        "context_ids": [],
        "created_ats": [],
        "levels": [],
        "node_indexes": [],
        "hashes": [],
        "root_hash": bytes(32),
    },
    "log_nodes": {"levels": [0], "node_indexes": [0]},
    "postings_merge": {"records": 100},
    "log_checkpoints": {"after": 0, "limit": 10},
    "log_save_checkpoint": {
        "tree_size": 0,
        "root_hash": bytes(32),
        "signed_at": datetime(2026, 1, 1, tzinfo=UTC),
        "note": "n",
    },
    "tenant_settings_update": dict.fromkeys(
        ("capture_source_text", "capture_query_text", "capture_answer_text")
    ),
    # Spans and the live event stream (tests/test_telemetry.py and test_events.py run them).
    "append_spans": {
        "span_trace_ids": ["4bf92f3577b34da6a3ce929d0e0e4736"],
        "span_ids": ["00f067aa0ba902b7"],
        "parent_span_ids": [None],
        "span_names": ["retrieve"],
        "span_kinds": ["INTERNAL"],
        "service_names": [None],
        "start_times": [datetime(2026, 1, 1, tzinfo=UTC)],
        "end_times": [datetime(2026, 1, 1, tzinfo=UTC)],
        "status_codes": ["UNSET"],
        "status_messages": [None],
        "attribute_docs": ["{}"],
    },
    "trace_spans": {"max_spans": 10},
    "layer_spans": {
        "trace_ids": ["4bf92f3577b34da6a3ce929d0e0e4736"],
        "span_ids": ["00f067aa0ba902b7"],
        "max_spans": 10,
    },
    "events_after": {"after": 0, "session_id": "any"},
    "events_notify": {"payload": "1:default"},
    "open_partitions_check": {"now": datetime(2026, 12, 1, tzinfo=UTC), "add": True},
    "statistics_due": {"from_records": 1000, "factor": 2.0},
    "statistics_analyze": {"table_name": "provenance"},
}
# Run as the owner: the application role may not create tenants.
OWNER_ONLY = {
    "tenant_create", "tenant_delete", "operator_audit_list", "bundle_import_settings",
    "bundle_retire_text_keys", "bundle_import_expiry", "bundle_import_tombstone", "bundle_analyze",
    "bundle_export_analyze", "lock_waits",
    "retention_policy_get",
    "retention_policy_set", "partitions_shape", "open_partitions_check", "open_partitions_validate",
}  # fmt: skip
# Files that act on what another file made first, in the same transaction.
MADE_BY = {"open_partitions_validate": "open_partitions_check", "log_advance": "log_lock_head"}
# Reads of provenance: on an empty database they find nothing.
READS = {
    "walk_back", "blast_radius", "blast_radius_by_source", "invalidate_by_transform_version",
    "invalidate_by_index_snapshot", "stale_sources", "suspicious_hops", "trace_contexts",
    "list_contexts", "get_contexts",
}  # fmt: skip


async def test_every_sql_file_prepares_and_runs_on_an_empty_database(
    pool: asyncpg.Pool, owner: asyncpg.Connection
) -> None:
    variable = re.compile(r"(?<![:\w]):'?[A-Za-z_]")
    async with pool.acquire() as connection:
        pool_key = connection.vouching_key
    assert set(QUERIES) >= READS | set(WRITE_VALUES)
    for path in sorted(SQL_DIR.glob("*.sql")):
        query = parse(path.read_text(), path.stem)
        assert query.name == path.stem
        assert not variable.search(query.sql), f"{path.name}: a psql variable was left in"
        assert not query.sql.endswith(";")
        values = SAMPLE_VALUES | WRITE_VALUES.get(query.name, {})
        values["tenant_token"] = db.tenant_token(pool_key, "default")
        missing = set(query.parameters) - set(values)
        assert not missing, f"{path.name}: add sample values for {sorted(missing)}"
        async with pool.acquire() as connection:
            chosen = owner if query.name in OWNER_ONLY else connection
            transaction = chosen.transaction()
            await transaction.start()
            await db.set_tenant(chosen, "default")
            try:
                if query.name in MADE_BY:
                    first = QUERIES[MADE_BY[query.name]]
                    await chosen.fetch(
                        first.sql, *first.arguments(values | WRITE_VALUES[first.name])
                    )
                statement = await chosen.prepare(query.sql)
                assert len(statement.get_parameters()) == len(query.parameters), path.name
                rows = await statement.fetch(*query.arguments(values))
            finally:
                await transaction.rollback()
        if query.name in READS:
            assert rows == [], f"{path.name} found rows in an empty database"
        elif query.name == "append_records":
            assert [row["inserted"] for row in rows] == [["sample_doc"]]
