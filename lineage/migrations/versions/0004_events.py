"""Spans and the live event stream (issue 7).

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

UPGRADE = """
-- Finished OpenTelemetry spans, sent by the SDK's span processor: a trace's span tree beside
-- its records. Observations, not records: no canonical form, replays are ignored.
CREATE TABLE spans (
    tenant_id      text        NOT NULL REFERENCES tenants,
    trace_id       text        NOT NULL,
    span_id        text        NOT NULL,
    parent_span_id text,
    name           text        NOT NULL,
    span_kind      text        NOT NULL,
    service_name   text,
    start_time     timestamptz NOT NULL,
    end_time       timestamptz NOT NULL,
    status_code    text        NOT NULL,
    status_message text,
    attributes     jsonb       NOT NULL DEFAULT '{}',
    received_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, trace_id, span_id)
);

-- One row per appended record, in the order the stream delivers them. event_id orders rows of
-- one transaction; xid (the inserting transaction) orders transactions: a reader emits only
-- rows whose xid is below its snapshot's xmin, so every transaction that could still add an
-- earlier (xid, event_id) has finished, and a cursor on (xid, event_id) never skips a row that
-- commits late.
CREATE TABLE events (
    tenant_id  text   NOT NULL,
    event_id   bigint GENERATED ALWAYS AS IDENTITY,
    xid        xid8   NOT NULL DEFAULT pg_current_xact_id(),
    context_id text   NOT NULL,
    PRIMARY KEY (tenant_id, event_id)
);
CREATE INDEX events_stream_order ON events (tenant_id, xid, event_id);

-- One statement per appended batch, whatever inserts into provenance; the notification is sent
-- at commit, so a woken reader finds the rows visible.
CREATE FUNCTION provenance_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO events (tenant_id, context_id)
    SELECT tenant_id, context_id FROM inserted;
    PERFORM pg_notify('lineage_events', tenant_id)
    FROM (SELECT DISTINCT tenant_id FROM inserted) AS tenants_notified;
    RETURN NULL;
END
$$;
CREATE TRIGGER provenance_events AFTER INSERT ON provenance
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION provenance_events();
ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_events;

ALTER TABLE spans ENABLE ROW LEVEL SECURITY;
ALTER TABLE spans FORCE ROW LEVEL SECURITY;
CREATE POLICY spans_tenant ON spans
    USING (tenant_id = current_setting('lineage.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lineage.tenant_id', true));
ALTER TABLE events ENABLE ROW LEVEL SECURITY;
ALTER TABLE events FORCE ROW LEVEL SECURITY;
CREATE POLICY events_tenant ON events
    USING (tenant_id = current_setting('lineage.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lineage.tenant_id', true));

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        GRANT SELECT, INSERT ON spans, events TO lineage_app;
    END IF;
END
$$;
"""

DOWNGRADE = """
DROP TRIGGER provenance_events ON provenance;
DROP FUNCTION provenance_events();
DROP TABLE events;
DROP TABLE spans;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
