"""The per-tenant verifiable log (issue 6): queue, leaves, subtree hashes, heads, checkpoints.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

LOG_TABLES = ("log_queue", "log_leaves", "log_nodes", "log_heads", "log_checkpoints")

UPGRADE = """
-- Records appended but not yet in their tenant's tree. A trigger on provenance fills it in the
-- appending transaction, so every committed record is queued, whoever inserted it; the
-- sequencer (lineage/verifiable_log/storage.py) drains it in queue order.
CREATE TABLE log_queue (
    tenant_id  text   NOT NULL,
    queued_id  bigint GENERATED ALWAYS AS IDENTITY,
    context_id text   NOT NULL,
    PRIMARY KEY (tenant_id, queued_id)
);

CREATE FUNCTION log_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO log_queue (tenant_id, context_id)
    SELECT tenant_id, context_id FROM appended;
    RETURN NULL;
END
$$;
CREATE TRIGGER provenance_log_queue AFTER INSERT ON provenance
    REFERENCING NEW TABLE AS appended
    FOR EACH STATEMENT EXECUTE FUNCTION log_enqueue();

-- Leaf index of each sequenced record: dense from 0 per tenant, each record once.
CREATE TABLE log_leaves (
    tenant_id  text   NOT NULL,
    leaf_index bigint NOT NULL CHECK (leaf_index >= 0),
    context_id text   NOT NULL,
    PRIMARY KEY (tenant_id, leaf_index),
    UNIQUE (tenant_id, context_id)
);

-- Hash of every complete subtree [index * 2^level, (index + 1) * 2^level) of the tenant's
-- tree, leaves at level 0. A complete subtree never changes as the log grows, so any proof is
-- assembled from O(log n) of these rows.
CREATE TABLE log_nodes (
    tenant_id  text     NOT NULL,
    level      smallint NOT NULL CHECK (level BETWEEN 0 AND 62),
    node_index bigint   NOT NULL CHECK (node_index >= 0),
    hash       bytea    NOT NULL CHECK (length(hash) = 32),
    PRIMARY KEY (tenant_id, level, node_index)
);

-- The tree as sequenced so far; its row is also the per-tenant sequencing lock.
CREATE TABLE log_heads (
    tenant_id  text        PRIMARY KEY,
    tree_size  bigint      NOT NULL DEFAULT 0,
    root_hash  bytea       NOT NULL DEFAULT sha256(''),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Signed checkpoints, one per tree size: `note` is the signed text exactly as served.
CREATE TABLE log_checkpoints (
    tenant_id text        NOT NULL,
    tree_size bigint      NOT NULL,
    root_hash bytea       NOT NULL,
    signed_at timestamptz NOT NULL,
    note      text        NOT NULL,
    PRIMARY KEY (tenant_id, tree_size)
);

-- Which tenants have queued records, for the background sequencer, which has no tenant yet.
CREATE FUNCTION log_pending_tenants() RETURNS SETOF text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT DISTINCT tenant_id FROM log_queue
$$;
REVOKE EXECUTE ON FUNCTION log_pending_tenants() FROM PUBLIC;

-- Records appended before this revision join the log first, oldest first.
INSERT INTO log_queue (tenant_id, context_id)
SELECT tenant_id, context_id FROM provenance ORDER BY tenant_id, created_at, context_id;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        GRANT SELECT, INSERT, DELETE ON log_queue TO lineage_app;
        GRANT SELECT, INSERT ON log_leaves, log_nodes, log_checkpoints TO lineage_app;
        GRANT SELECT, INSERT, UPDATE ON log_heads TO lineage_app;
        GRANT EXECUTE ON FUNCTION log_pending_tenants() TO lineage_app;
    END IF;
END
$$;
"""

POLICY = """
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
CREATE POLICY {table}_tenant ON {table}
    USING (tenant_id = current_setting('lineage.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lineage.tenant_id', true));
"""

# log_pending_tenants runs as the owner, whom FORCE confines too unless it is a superuser.
OWNER_READS_QUEUE = """
DO $$
BEGIN
    EXECUTE format(
        'CREATE POLICY log_queue_pending ON log_queue FOR SELECT TO %I USING (true)', current_user
    );
END
$$;
"""

DOWNGRADE = """
DROP FUNCTION log_pending_tenants();
DROP TRIGGER provenance_log_queue ON provenance;
DROP FUNCTION log_enqueue();
DROP TABLE log_checkpoints;
DROP TABLE log_heads;
DROP TABLE log_nodes;
DROP TABLE log_leaves;
DROP TABLE log_queue;
"""


def upgrade() -> None:
    op.execute(UPGRADE)
    for table in LOG_TABLES:
        op.execute(POLICY.format(table=table))
    op.execute(OWNER_READS_QUEUE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
