"""Event-stream positions and audit ids counted per tenant, from no node's transaction ids.

Positions were (xid, event_id): a global identity, so one tenant counted another's appends, and
the inserting transaction's xid, so a stream waited for every transaction of the whole server
(a bulk load in another database held it back for seconds) and, on Citus, compared the
coordinator's xids with a worker's. Audit ids came from a global identity too. Now each tenant
has its own counters in `tenant_counters`; an append takes its tenant's events counter last,
holding the row until it commits, so positions are dense and commit in their order, and a
stream needs no horizon: every row below a visible position is visible.

Revision ID: 0009
Revises: 0008
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

UPGRADE = """
-- The last value a tenant's counter gave ('events': stream positions, 'audit': audit ids).
-- The row is locked from the statement that advances it until the transaction ends.
CREATE TABLE tenant_counters (
    tenant_id  text   NOT NULL,
    counter    text   NOT NULL CHECK (counter IN ('events', 'audit')),
    last_value bigint NOT NULL CHECK (last_value >= 0),
    PRIMARY KEY (tenant_id, counter)
);

-- The stream no longer comes from a trigger: sql/events_append.sql, run by the append itself,
-- numbers the new records (a trigger with a transition table cannot run on a Citus shard).
DROP TRIGGER provenance_events ON provenance;
DROP FUNCTION provenance_events();
ALTER TABLE events RENAME TO events_by_xid;
ALTER TABLE events_by_xid NO FORCE ROW LEVEL SECURITY;  -- the owner renumbers every tenant
CREATE TABLE events (
    tenant_id  text   NOT NULL,
    position   bigint NOT NULL CHECK (position > 0),
    context_id text   NOT NULL,
    PRIMARY KEY (tenant_id, position)
);
INSERT INTO events (tenant_id, position, context_id)
SELECT tenant_id, row_number() OVER (PARTITION BY tenant_id ORDER BY xid, event_id), context_id
FROM events_by_xid;
DROP TABLE events_by_xid;
INSERT INTO tenant_counters (tenant_id, counter, last_value)
SELECT tenant_id, 'events', max(position) FROM events GROUP BY tenant_id;

-- Audit ids go on from each tenant's highest, so existing rows keep theirs.
ALTER TABLE audit_log ALTER COLUMN audit_id DROP IDENTITY;
ALTER TABLE audit_log NO FORCE ROW LEVEL SECURITY;
INSERT INTO tenant_counters (tenant_id, counter, last_value)
SELECT tenant_id, 'audit', max(audit_id) FROM audit_log GROUP BY tenant_id;
ALTER TABLE audit_log FORCE ROW LEVEL SECURITY;

ALTER TABLE events ENABLE ROW LEVEL SECURITY;
ALTER TABLE events FORCE ROW LEVEL SECURITY;
CREATE POLICY events_tenant ON events
    USING (tenant_id = current_setting('lineage.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lineage.tenant_id', true));
ALTER TABLE tenant_counters ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenant_counters FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_counters_tenant ON tenant_counters
    USING (tenant_id = current_setting('lineage.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lineage.tenant_id', true));

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        GRANT SELECT, INSERT ON events TO lineage_app;
        GRANT SELECT, INSERT, UPDATE ON tenant_counters TO lineage_app;
    END IF;
END
$$;
"""

DOWNGRADE = """
ALTER TABLE events RENAME TO events_by_position;
ALTER TABLE events_by_position NO FORCE ROW LEVEL SECURITY;
CREATE TABLE events (
    tenant_id  text   NOT NULL,
    event_id   bigint GENERATED ALWAYS AS IDENTITY,
    xid        xid8   NOT NULL DEFAULT pg_current_xact_id(),
    context_id text   NOT NULL,
    PRIMARY KEY (tenant_id, event_id)
);
CREATE INDEX events_stream_order ON events (tenant_id, xid, event_id);
INSERT INTO events (tenant_id, context_id)
SELECT tenant_id, context_id FROM events_by_position ORDER BY tenant_id, position;
DROP TABLE events_by_position;
CREATE FUNCTION provenance_events() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO events (tenant_id, context_id)
    SELECT tenant_id, context_id FROM inserted;
    PERFORM pg_notify('lineage_events', tenant_id)
    FROM (SELECT DISTINCT tenant_id FROM inserted) AS tenants_notified;
    RETURN NULL;
END
$f$;
CREATE TRIGGER provenance_events AFTER INSERT ON provenance
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION provenance_events();
ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_events;
ALTER TABLE events ENABLE ROW LEVEL SECURITY;
ALTER TABLE events FORCE ROW LEVEL SECURITY;
CREATE POLICY events_tenant ON events
    USING (tenant_id = current_setting('lineage.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lineage.tenant_id', true));
ALTER TABLE audit_log ALTER COLUMN audit_id ADD GENERATED ALWAYS AS IDENTITY;
ALTER TABLE tenant_counters NO FORCE ROW LEVEL SECURITY;
SELECT setval(pg_get_serial_sequence('audit_log', 'audit_id'),
              (SELECT coalesce(max(last_value), 0) + 1 FROM tenant_counters
               WHERE counter = 'audit'), false);
DROP TABLE tenant_counters;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        GRANT SELECT, INSERT ON events TO lineage_app;
    END IF;
END
$$;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
