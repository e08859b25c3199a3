"""The verifiable log's queue is the event stream: a tenant's records wait for their leaves while
their events lie past `log_heads.events_logged`, and `log_queue` goes.

Every append gave each record a stream position in `events` and a row in `log_queue` beside
it: a second row and index entry per record, written, then deleted when the record got its leaf
(about 116 bytes stored and 200 bytes of WAL a record, bench/RESULTS-write-bytes.md). Positions
commit in order (the append takes its tenant's counter last), so the events past a mark are the
queue, in the order the log takes them; a log step moves the mark instead of deleting rows.

Each tenant's mark is set from its queue: when the queued records' events are the newest, in
queue order, it stands before them. A tenant whose queue was not its stream's tail (records
queued by hand, or appended before the event stream existed, migration 0004) has its queued
records given new events, in queue order, and the mark stands before those. The owner reads
every tenant's head and events (log_pending_tenants, retention), as it read the queue.

Revision ID: 0039
Revises: 0038
"""

from alembic import op

from lineage.db import functions, tenant_rewrite

revision = "0039"
down_revision = "0038"
branch_labels = None
depends_on = None

FUNCTIONS = (
    "lineage_append",
    "lineage_log_advance",
    "log_pending_tenants",
    "lineage_retention_apply",
    "lineage_statistics_tables",
)
# The revision each function was loaded by before this one, for the downgrade.
EARLIER = {
    "lineage_append": "0038",
    "lineage_log_advance": "0029",
    "log_pending_tenants": "0018",
    "lineage_retention_apply": "0036",
    "lineage_statistics_tables": "0037",
}
LIFTED = ("events", "log_heads", "log_queue", "tenant_counters")

# Two statements: Citus adds no column with a constraint in one.
ADD_MARK = (
    "ALTER TABLE log_heads ADD COLUMN events_logged bigint NOT NULL DEFAULT 0",
    "ALTER TABLE log_heads ADD CONSTRAINT log_heads_events_logged_check CHECK (events_logged >= 0)",
)
# One tenant (%1$L) at a time, every statement naming it: on Citus each is a router statement.
# Whether the queue is the stream's tail, in queue order.
TAIL = """
(SELECT array_agg(e.context_id ORDER BY e.position) FROM events AS e
 WHERE e.tenant_id = %1$L
   AND e.position > (SELECT coalesce(max(x.position), 0) FROM events AS x
                     WHERE x.tenant_id = %1$L)
                    - (SELECT count(*) FROM log_queue AS q WHERE q.tenant_id = %1$L))
IS NOT DISTINCT FROM
(SELECT array_agg(q.context_id ORDER BY q.queued_id) FROM log_queue AS q
 WHERE q.tenant_id = %1$L)
"""
REQUEUE = f"""
INSERT INTO events (tenant_id, position, context_id)
SELECT %1$L, last.position + q.n, q.context_id
FROM (SELECT coalesce(max(e.position), 0) AS position FROM events AS e
      WHERE e.tenant_id = %1$L) AS last
CROSS JOIN (SELECT q.context_id, row_number() OVER (ORDER BY q.queued_id) AS n
            FROM log_queue AS q WHERE q.tenant_id = %1$L) AS q
WHERE NOT {TAIL}
"""
# The stream's counter follows any events given above.
COUNTER = """
INSERT INTO tenant_counters AS c (tenant_id, counter, last_value)
SELECT %1$L, 'events', max(e.position) FROM events AS e
WHERE e.tenant_id = %1$L
HAVING max(e.position) IS NOT NULL
ON CONFLICT (tenant_id, counter)
    DO UPDATE SET last_value = greatest(c.last_value, excluded.last_value)
"""
MARK = """
INSERT INTO log_heads AS h (tenant_id, events_logged)
SELECT %1$L, greatest((SELECT coalesce(max(e.position), 0) FROM events AS e
                       WHERE e.tenant_id = %1$L)
                      - (SELECT count(*) FROM log_queue AS q WHERE q.tenant_id = %1$L), 0)
ON CONFLICT (tenant_id) DO UPDATE SET events_logged = excluded.events_logged
"""
# The owner reads every tenant's mark and events, as it read every tenant's queue.
OWNER_READS = """
DO $$
BEGIN
    EXECUTE format('CREATE POLICY log_heads_pending ON log_heads FOR SELECT TO %I USING (true)',
                   current_user);
    EXECUTE format('CREATE POLICY events_pending ON events FOR SELECT TO %I USING (true)',
                   current_user);
END
$$
"""

QUEUE = """
CREATE TABLE log_queue (
    tenant_id  text   NOT NULL,
    queued_id  bigint GENERATED ALWAYS AS IDENTITY,
    context_id text   NOT NULL,
    PRIMARY KEY (tenant_id, queued_id)
)
"""
OWNER_READS_QUEUE = """
DO $$
BEGIN
    EXECUTE format('CREATE POLICY log_queue_pending ON log_queue FOR SELECT TO %I USING (true)',
                   current_user);
END
$$
"""
UNMARK = """
INSERT INTO log_queue (tenant_id, context_id)
SELECT %1$L, e.context_id FROM events AS e
WHERE e.tenant_id = %1$L
  AND e.position > coalesce((SELECT h.events_logged FROM log_heads AS h
                             WHERE h.tenant_id = %1$L), 0)
ORDER BY e.position
"""


def upgrade() -> None:
    for statement in ADD_MARK:
        op.execute(statement)
    op.execute(
        tenant_rewrite.each_tenant(";;".join((REQUEUE, COUNTER, MARK)), LIFTED, update=False)
    )
    op.execute("DROP TABLE log_queue")
    op.execute(OWNER_READS)
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    op.execute(QUEUE)
    op.execute(OWNER_READS_QUEUE)
    tenant_rewrite.confine_new_table("log_queue")
    op.execute(tenant_rewrite.each_tenant(UNMARK, LIFTED, update=False))
    op.execute("DROP POLICY events_pending ON events")
    op.execute("DROP POLICY log_heads_pending ON log_heads")
    op.execute("ALTER TABLE log_heads DROP COLUMN events_logged")
    for name, earlier in EARLIER.items():
        functions.create(op.get_bind(), earlier, [name])
