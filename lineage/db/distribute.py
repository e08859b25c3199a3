"""Distribute a migrated schema on a Citus coordinator, with Citus's default settings.

Every table with a `tenant_id` column becomes a distributed table, sharded by it and colocated
with `tenants`, so each tenant's rows of every table share a shard and each tenant's query is
a single-shard router query. `api_keys`, read by key id before any tenant is known, becomes a
reference table (a copy on every node). The other tables (alembic's, the operator's audit)
stay on the coordinator. Idempotent: what is distributed already is left as it is.

The owner's `tenant_vouching_key`, which the row-security policies check each session's tenant
token against on whichever node runs the query, is copied to every worker as a local table (as
a reference table, each check would be a distributed query nested in a shard's): run distribute
again after adding a worker, before any shard moves there. The functions that write one
tenant's rows (appends, log steps) are distributed by their tenant argument: each call runs on
the tenant's worker alone.

Shard moves and tenant isolation replicate the writes made meanwhile as a role Citus makes, a
member of the owner but no superuser, which PostgreSQL refuses to let replicate into a table
whose row security is forced on its owner: so distributed tables do not force it. The service
runs as `lineage_app`, which row security confines either way, and the owner's functions check
the tenant token themselves; distribute refuses a schema without `lineage_app`.

Citus refuses to distribute a table with triggers (unless `citus.enable_unsafe_triggers`), so
the append-only triggers are dropped first: on Citus the owner's revoked UPDATE and TRUNCATE
(migration 0012) keep the tables append-only, and the application role never had them.
"""

from dataclasses import dataclass

import psycopg
from psycopg import sql

from lineage.core.errors import NotDistributable
from lineage.core.progress import Progress, unwatched

# The functions that return other sessions' statement text, revoked by migration 0017.
ACTIVITY_FUNCTIONS = (
    "pg_catalog.pg_stat_get_activity(integer), pg_catalog.pg_stat_get_backend_activity(integer)"
)

# lineage_captures runs a query on the worker holding a shard (see its file), which Citus allows
# only with this setting; a migration run before CREATE EXTENSION citus left it out
# (lineage.db.functions.loadable).
NESTED_EXECUTION = (
    "ALTER FUNCTION lineage_captures(text, text) SET citus.allow_nested_distributed_execution = on"
)

# Citus refuses a subquery in a distributed table's policy, so there row security checks the
# tenant per row, not once a statement as migration 0022 has it on plain PostgreSQL.
TENANT_PER_ROW = "tenant_id = lineage_session_tenant()"
CAPTURED_TEXT_RULE = " AND lineage_captures(tenant_id, context_id)"  # migration 0014's

COLOCATION_TABLE = "tenants"
# Functions that write one tenant's rows, by the argument naming the tenant.
DELEGATED = {
    "lineage_append": "p_tenant",
    "lineage_log_lock": "p_tenant",
    "lineage_log_advance": "p_tenant",
    "lineage_postings_merge": "p_tenant",
}
REFERENCE_TABLES = ("api_keys",)
# The triggers migrations made that Citus cannot keep; any other trigger stops distribute.
APPEND_ONLY_TRIGGERS = {
    "provenance": ("provenance_append_only", "provenance_no_truncate"),
    "audit_log": ("audit_log_append_only", "audit_log_no_truncate"),
    "record_signatures": ("record_signatures_append_only",),  # before migration 0036
}


# On each worker, as the owner: the coordinator's key, in a table lineage_app cannot read.
WORKER_VOUCHING_KEY = """
CREATE TABLE IF NOT EXISTS tenant_vouching_key (
    only_row  boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    key       bytea   NOT NULL CHECK (length(key) = 32),
    inner_pad bytea   NOT NULL CHECK (length(inner_pad) = 64),
    outer_pad bytea   NOT NULL CHECK (length(outer_pad) = 64)
);
INSERT INTO tenant_vouching_key (key, inner_pad, outer_pad) VALUES ({}, {}, {})
ON CONFLICT (only_row) DO UPDATE
    SET key = excluded.key, inner_pad = excluded.inner_pad, outer_pad = excluded.outer_pad
"""


@dataclass(frozen=True)
class Plan:
    distributed: tuple[str, ...]  # by tenant_id, in an order foreign keys allow
    reference: tuple[str, ...]
    local: tuple[str, ...]


def plan(connection: psycopg.Connection) -> Plan:
    """Which table goes where, from the catalog of the current schema."""
    rows = connection.execute(
        """
        SELECT c.relname,
               EXISTS (SELECT 1 FROM pg_attribute AS a
                       WHERE a.attrelid = c.oid AND a.attname = 'tenant_id'
                         AND NOT a.attisdropped) AS has_tenant
        FROM pg_class AS c
        WHERE c.relnamespace = to_regnamespace(current_schema())
          AND c.relkind IN ('r', 'p') AND NOT c.relispartition
        ORDER BY c.relname
        """
    ).fetchall()
    tenant_tables = [name for name, has_tenant in rows if has_tenant]
    reference = tuple(name for name in REFERENCE_TABLES if name in tenant_tables)
    local = tuple(name for name, has_tenant in rows if not has_tenant)
    distributed = [name for name in tenant_tables if name not in reference]
    if COLOCATION_TABLE not in distributed:
        raise NotDistributable(f"no {COLOCATION_TABLE} table: run `lineage migrate` first")
    return Plan(tuple(_referenced_first(connection, distributed)), reference, local)


def _referenced_first(connection: psycopg.Connection, tables: list[str]) -> list[str]:
    """`tenants` first, then each table after those its foreign keys reference."""
    references: dict[str, set[str]] = {name: set() for name in tables}
    for referencing, referenced in connection.execute(
        """
        SELECT f.conrelid::regclass::text, f.confrelid::regclass::text
        FROM pg_constraint AS f
        WHERE f.contype = 'f' AND f.conrelid <> f.confrelid
          AND f.connamespace = to_regnamespace(current_schema())
        """
    ).fetchall():
        if referencing in references and referenced in references:
            references[referencing].add(referenced)
    ordered = [COLOCATION_TABLE]
    while len(ordered) < len(tables):
        ready = sorted(
            name for name in tables if name not in ordered and references[name] <= set(ordered)
        )
        if not ready:
            raise NotDistributable(
                f"foreign keys among {sorted(set(tables) - set(ordered))} form a cycle"
            )
        ordered.extend(ready)
    return ordered


def distribute(url: str, progress: Progress = unwatched) -> list[str]:
    """Distribute the schema at `url` (a Citus coordinator); returns what was done, one line
    per table. Raises NotDistributable, naming the reason, before changing anything."""
    done: list[str] = []
    with psycopg.connect(url, autocommit=True) as connection:
        _check_coordinator(connection)
        _check_application_role(connection)
        layout = plan(connection)
        placed: dict[str, str] = dict(
            connection.execute(
                "SELECT logicalrelid::regclass::text, partmethod FROM pg_dist_partition"
            ).fetchall()
        )
        _check_triggers(connection, [*layout.distributed, *layout.reference], placed)
        for table, triggers in APPEND_ONLY_TRIGGERS.items():
            for trigger in triggers:
                if _has_trigger(connection, table, trigger):
                    connection.execute(
                        sql.SQL("DROP TRIGGER {} ON {}").format(
                            sql.Identifier(trigger), sql.Identifier(table)
                        )
                    )
                    done.append(
                        f"dropped trigger {trigger} on {table} (Citus keeps no trigger on a "
                        "distributed table; UPDATE and TRUNCATE stay revoked from the owner)"
                    )
        connection.execute(NESTED_EXECUTION)
        done.append("lineage_captures: may run its query on the worker holding a shard")
        tables = [*layout.distributed, *layout.reference]
        done.extend(_tenant_checked_per_row(connection, tables, placed))
        for table in layout.distributed:
            progress("distribute", tables.index(table), len(tables), detail=table)
            if placed.get(table) == "h":
                done.append(f"{table}: already distributed by tenant_id")
                continue
            colocate = "none" if table == COLOCATION_TABLE else COLOCATION_TABLE
            connection.execute(
                "SELECT create_distributed_table(%s, 'tenant_id', colocate_with => %s)",
                (table, colocate),
            )
            done.append(f"{table}: distributed by tenant_id, colocated with {COLOCATION_TABLE}")
        for table in layout.reference:
            progress("distribute", tables.index(table), len(tables), detail=table)
            if placed.get(table) == "n":
                done.append(f"{table}: already a reference table")
                continue
            connection.execute("SELECT create_reference_table(%s)", (table,))
            done.append(f"{table}: reference table (a copy on every node)")
        progress("distribute", len(tables), len(tables))
        done.extend(_row_security_not_forced(connection, layout.distributed))
        done.extend(f"{table}: left on the coordinator (no tenant_id)" for table in layout.local)
        done.append(_copy_vouching_key(connection))
        done.append(_hide_activity_on_workers(connection))
        done.extend(_delegate_by_tenant(connection))
    return done


def _delegate_by_tenant(connection: psycopg.Connection) -> list[str]:
    """Each function that writes one tenant's rows (DELEGATED), distributed by its tenant
    argument: Citus runs the whole call on the tenant's worker, one router call."""
    done = []
    for function, argument in DELEGATED.items():
        row = connection.execute(
            "SELECT p.oid::regprocedure::text, d.distribution_argument_index IS NOT NULL "
            "FROM pg_proc AS p LEFT JOIN pg_dist_object AS d "
            "ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid "
            "WHERE p.proname = %s AND p.pronamespace = 'public'::regnamespace",
            (function,),
        ).fetchone()
        if row is None:  # a schema before migration 0029, which distributes it itself
            done.append(f"{function}: not in this schema yet (`lineage migrate` adds it)")
            continue
        signature, placed_already = row
        if placed_already:
            done.append(f"{function}: already runs on its tenant's worker")
            continue
        connection.execute(
            "SELECT create_distributed_function(%s, %s, colocate_with := %s, "
            "force_delegation := true)",
            (signature, argument, COLOCATION_TABLE),
        )
        done.append(f"{function}: distributed by {argument}, runs on its tenant's worker")
    return done


def _tenant_checked_per_row(
    connection: psycopg.Connection, tables: list[str], placed: dict[str, str]
) -> list[str]:
    """Each tenant policy of a table about to be placed, in the form Citus accepts."""
    done = []
    for (table,) in connection.execute(
        "SELECT tablename FROM pg_policies "
        "WHERE schemaname = current_schema() AND policyname = tablename || '_tenant' "
        "AND tablename = ANY (%s) ORDER BY tablename",
        ([table for table in tables if table not in placed],),
    ).fetchall():
        with_check = TENANT_PER_ROW + (CAPTURED_TEXT_RULE if table == "context_text" else "")
        connection.execute(
            sql.SQL("ALTER POLICY {} ON {} USING ({}) WITH CHECK ({})").format(
                sql.Identifier(f"{table}_tenant"),
                sql.Identifier(table),
                sql.SQL(TENANT_PER_ROW),
                sql.SQL(with_check),
            )
        )
        done.append(f"{table}: row security checks the tenant per row (Citus takes no subquery)")
    return done


def _row_security_not_forced(connection: psycopg.Connection, tables: tuple[str, ...]) -> list[str]:
    """Row security no longer forced on the owner of each distributed table (and so on its
    shards): the writes a shard move replicates are applied as a member of the owner."""
    done = []
    for (table,) in connection.execute(
        "SELECT relname FROM pg_class WHERE relforcerowsecurity AND relname = ANY (%s) "
        "AND relnamespace = current_schema()::regnamespace ORDER BY relname",
        (list(tables),),
    ).fetchall():
        connection.execute(
            sql.SQL("ALTER TABLE {} NO FORCE ROW LEVEL SECURITY").format(sql.Identifier(table))
        )
        done.append(f"{table}: row security enabled, not forced on the owner (for shard moves)")
    return done


def _hide_activity_on_workers(connection: psycopg.Connection) -> str:
    """What migration 0017 does on the coordinator: no session of the application role reads
    another's statements (its tenant token) through pg_stat_activity or citus_stat_activity."""
    _on_every_worker(
        connection,
        f"REVOKE EXECUTE ON FUNCTION {ACTIVITY_FUNCTIONS} FROM PUBLIC",
        "could not hide statement text on a worker",
    )
    return "pg_stat_activity: statement text hidden from lineage_app on every worker"


def _copy_vouching_key(connection: psycopg.Connection) -> str:
    key = connection.execute("SELECT key, inner_pad, outer_pad FROM tenant_vouching_key").fetchone()
    if key is None:
        raise NotDistributable("no tenant vouching key: run `lineage migrate` first")
    command = sql.SQL(WORKER_VOUCHING_KEY).format(*(sql.Literal(bytes(part)) for part in key))
    _on_every_worker(
        connection, command.as_string(connection), "could not copy the tenant vouching key"
    )
    return "tenant_vouching_key: copied to every worker (local there, the owner's only)"


def _on_every_worker(connection: psycopg.Connection, command: str, failure: str) -> None:
    """Run `command` on each worker (what Citus does not propagate), or say where it failed."""
    failed = [
        f"{node}:{port}: {result}"
        for node, port, success, result in connection.execute(
            "SELECT nodename, nodeport, success, result FROM run_command_on_workers(%s)",
            (command,),
        ).fetchall()
        if not success
    ]
    if failed:
        raise NotDistributable(f"{failure}: " + "; ".join(failed))


def _check_coordinator(connection: psycopg.Connection) -> None:
    if connection.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone() is None:
        raise NotDistributable(
            "the citus extension is not installed in this database (CREATE EXTENSION citus on "
            "the coordinator and every worker, then citus_add_node for each worker)"
        )
    row = connection.execute("SELECT citus_is_coordinator()").fetchone()
    if row is None or not row[0]:
        raise NotDistributable("this is not the Citus coordinator: run distribute against it")
    workers = connection.execute("SELECT count(*) FROM citus_get_active_worker_nodes()").fetchone()
    if workers is None or workers[0] == 0:
        raise NotDistributable("the coordinator has no active workers (citus_add_node first)")


def _check_application_role(connection: psycopg.Connection) -> None:
    """Without lineage_app the service runs as the owner, whom only forced row security
    confines: distribute, which stops forcing it, needs the role."""
    if (
        connection.execute("SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app'").fetchone()
        is None
    ):
        raise NotDistributable(
            "no role lineage_app: on Citus the service must run as lineage_app, not as the "
            "owner (create it, or run `lineage migrate` as a role that may, then distribute)"
        )


def _has_trigger(connection: psycopg.Connection, table: str, trigger: str) -> bool:
    row = connection.execute(
        "SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND tgname = %s",
        (table, trigger),
    ).fetchone()
    return row is not None


def _check_triggers(
    connection: psycopg.Connection, tables: list[str], placed: dict[str, str]
) -> None:
    """Refuse, before any change, a trigger distribute does not know to drop."""
    unknown = [
        f"{trigger} on {table}"
        for table, trigger in connection.execute(
            "SELECT tgrelid::regclass::text, tgname FROM pg_trigger "
            "WHERE NOT tgisinternal AND tgrelid::regclass::text = ANY (%s)",
            (tables,),
        ).fetchall()
        if trigger not in APPEND_ONLY_TRIGGERS.get(table, ()) and table not in placed
    ]
    if unknown:
        raise NotDistributable(
            "Citus distributes no table with triggers (with its default settings): "
            + ", ".join(unknown)
        )


# The tenant's shard group: its shard of `tenants`, the hash range and where it is placed.
TENANT_SHARD = """
SELECT s.shardid, s.shardminvalue::integer, s.shardmaxvalue::integer,
       worker_hash(%(tenant)s::text), n.nodeid, n.nodename, n.nodeport
FROM pg_dist_shard AS s
JOIN pg_dist_placement AS p USING (shardid)
JOIN pg_dist_node AS n ON n.groupid = p.groupid AND n.noderole = 'primary'
WHERE s.shardid = get_shard_id_for_distribution_column('tenants', %(tenant)s::text)
"""


def isolate(url: str, tenant: str, host: str, port: int) -> str:
    """Give `tenant` a shard group of its own on the worker at host:port, while writes go on.

    Its shard group is split at the tenant's hash (citus_split_shard_by_split_points, by
    logical replication) and every piece is placed on that worker. Not isolate_tenant_to_new_
    shard: it splits in place, and Citus gives a piece made in place its replica identity only
    after the split's replication began, so an UPDATE or DELETE in between (the stream counter,
    the log queue) stops the split's subscription for good. Returns what was done."""
    with psycopg.connect(url, autocommit=True) as connection:
        _check_coordinator(connection)
        if (
            connection.execute("SELECT 1 FROM tenants WHERE tenant_id = %s", (tenant,)).fetchone()
            is None
        ):
            raise NotDistributable(f"no tenant {tenant!r}")
        target = connection.execute(
            "SELECT nodeid FROM pg_dist_node WHERE nodename = %s AND nodeport = %s "
            "AND noderole = 'primary' AND isactive AND shouldhaveshards",
            (host, port),
        ).fetchone()
        if target is None:
            raise NotDistributable(
                f"no active worker at {host}:{port} (citus_add_node it, then lineage distribute)"
            )
        row = connection.execute(TENANT_SHARD, {"tenant": tenant}).fetchone()
        if row is None:
            raise NotDistributable("tenants is not distributed: run `lineage distribute` first")
        shard, low, high, point, source, source_host, source_port = row
        if source == target[0]:
            raise NotDistributable(
                f"tenant {tenant!r} is on {host}:{port} already: name another worker (Citus "
                "cannot split a shard group in place while writes go on; move it back after)"
            )
        points = [str(p) for p in (point - 1, point) if low <= p < high]
        if points:
            connection.execute(
                "SELECT citus_split_shard_by_split_points(%s, %s, %s, 'force_logical')",
                (shard, points, [target[0]] * (len(points) + 1)),
            )
        else:
            connection.execute(
                "SELECT citus_move_shard_placement(%s, %s, %s, %s, %s, 'force_logical')",
                (shard, source_host, source_port, host, port),
            )
        isolated = connection.execute(TENANT_SHARD, {"tenant": tenant}).fetchone()
    assert isolated is not None
    return (
        f"tenant {tenant!r}: shard group {isolated[0]} of its own (hash {point}), "
        f"moved from {source_host}:{source_port} to {host}:{port}"
    )
