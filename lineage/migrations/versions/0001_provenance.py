"""The provenance table, its indexes, the append-only triggers and the opt-in text table.

Revision ID: 0001
Revises:
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE tenants (
    tenant_id  text PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO tenants (tenant_id) VALUES ('default');

CREATE TABLE provenance (
    tenant_id         text        NOT NULL REFERENCES tenants,
    context_id        text        NOT NULL,
    parent_ids        text[]      NOT NULL DEFAULT '{}',
    kind              text        NOT NULL,
    source_uri        text,
    content_hash      text        NOT NULL,
    transform         text,
    transform_version text,
    produced_by       text,
    index_snapshot    text,
    trace_id          text,
    created_at        timestamptz NOT NULL,
    attributes        jsonb       NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, context_id)
);
-- Descendant walks: parent_ids && / @> ARRAY[...] is served by this index.
-- fastupdate off: a pending list would be rescanned by every probe of a walk's frontier.
CREATE INDEX provenance_parent_ids ON provenance USING gin (parent_ids)
    WITH (fastupdate = off);
CREATE INDEX provenance_source_uri ON provenance (tenant_id, source_uri, created_at)
    WHERE source_uri IS NOT NULL;
CREATE INDEX provenance_trace_id ON provenance (tenant_id, trace_id) WHERE trace_id IS NOT NULL;
CREATE INDEX provenance_transform ON provenance (tenant_id, transform, transform_version);
CREATE INDEX provenance_transform_version ON provenance (tenant_id, transform_version)
    WHERE transform_version IS NOT NULL;
CREATE INDEX provenance_index_snapshot ON provenance (tenant_id, index_snapshot, created_at)
    WHERE index_snapshot IS NOT NULL;
CREATE INDEX provenance_produced_by ON provenance (tenant_id, produced_by, created_at)
    WHERE produced_by IS NOT NULL;
CREATE INDEX provenance_created_at ON provenance (tenant_id, created_at, context_id);

CREATE FUNCTION provenance_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'provenance is append-only: % is refused', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'record what changed as a new record derived from the old one';
END
$$;
CREATE TRIGGER provenance_append_only BEFORE UPDATE OR DELETE ON provenance
    FOR EACH ROW EXECUTE FUNCTION provenance_refuse_change();
CREATE TRIGGER provenance_no_truncate BEFORE TRUNCATE ON provenance
    FOR EACH STATEMENT EXECUTE FUNCTION provenance_refuse_change();
-- ALWAYS: session_replication_role = replica must not skip them.
ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_append_only;
ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_no_truncate;

-- The two graph walks every named query builds on. Each returns every reached node once, at
-- its minimal depth (the start is depth 0): a step expands only the frontier and drops what was
-- seen (EXCEPT hashes both sides), so diamonds cost their nodes, not their paths. The walk stops
-- after max_depth; truncated says that nodes lie beyond it. LANGUAGE sql and STABLE, so the
-- planner inlines them and EXPLAIN shows the index each step uses.
CREATE FUNCTION lineage_ancestors(p_tenant_id text, p_context_id text, p_max_depth int)
RETURNS TABLE (context_id text, depth int, truncated boolean)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE walk (depth, frontier, seen) AS (
        SELECT 0, ARRAY[p.context_id], ARRAY[p.context_id]
        FROM provenance AS p
        WHERE p.tenant_id = p_tenant_id AND p.context_id = p_context_id
      UNION ALL
        SELECT w.depth + 1, step.ids, w.seen || step.ids
        FROM walk AS w
        CROSS JOIN LATERAL (
            SELECT ARRAY(
                -- Upward: parents of the frontier, found by primary key.
                SELECT parent.id
                FROM provenance AS c CROSS JOIN LATERAL unnest(c.parent_ids) AS parent (id)
                WHERE c.tenant_id = p_tenant_id AND c.context_id = ANY (w.frontier)
                EXCEPT
                SELECT unnest(w.seen)
            ) AS ids
            OFFSET 0  -- evaluate the step once, not once per use of its result
        ) AS step
        WHERE w.depth <= p_max_depth AND cardinality(w.frontier) > 0
    )
    SELECT node.id, w.depth,
           coalesce((SELECT cardinality(b.frontier) > 0 FROM walk AS b
                     WHERE b.depth = p_max_depth + 1), false)
    FROM walk AS w CROSS JOIN LATERAL unnest(w.frontier) AS node (id)
    WHERE w.depth <= p_max_depth
$$;

CREATE FUNCTION lineage_descendants(p_tenant_id text, p_start_ids text[], p_max_depth int)
RETURNS TABLE (context_id text, depth int, truncated boolean)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE walk (depth, frontier, seen) AS (
        SELECT 0, start.ids, start.ids
        FROM (SELECT ARRAY(SELECT p.context_id FROM provenance AS p
                           WHERE p.tenant_id = p_tenant_id
                             AND p.context_id = ANY (p_start_ids)) AS ids) AS start
      UNION ALL
        SELECT w.depth + 1, step.ids, w.seen || step.ids
        FROM walk AS w
        CROSS JOIN LATERAL (
            SELECT ARRAY(
                -- Downward: children of the frontier, found by the GIN index on parent_ids.
                SELECT c.context_id
                FROM provenance AS c
                WHERE c.tenant_id = p_tenant_id AND c.parent_ids && w.frontier
                EXCEPT
                SELECT unnest(w.seen)
            ) AS ids
            OFFSET 0  -- evaluate the step once, not once per use of its result
        ) AS step
        WHERE w.depth <= p_max_depth AND cardinality(w.frontier) > 0
    )
    SELECT node.id, w.depth,
           coalesce((SELECT cardinality(b.frontier) > 0 FROM walk AS b
                     WHERE b.depth = p_max_depth + 1), false)
    FROM walk AS w CROSS JOIN LATERAL unnest(w.frontier) AS node (id)
    WHERE w.depth <= p_max_depth
$$;

-- Derived: each transform version once, with a PEP 440 sort key; never part of a record.
CREATE TABLE transform_versions (
    tenant_id         text        NOT NULL,
    transform         text        NOT NULL,
    transform_version text        NOT NULL,
    version_key       text COLLATE "C",
    first_seen        timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, transform, transform_version)
);

-- Opt-in captured text, apart from provenance so it can be purged while provenance stays.
CREATE TABLE context_text (
    tenant_id   text        NOT NULL,
    context_id  text        NOT NULL,
    text        text        NOT NULL,
    captured_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, context_id),
    FOREIGN KEY (tenant_id, context_id) REFERENCES provenance
);
CREATE TABLE tenant_settings (
    tenant_id    text PRIMARY KEY REFERENCES tenants,
    capture_text boolean NOT NULL DEFAULT false
);

-- The application role (made by `lineage migrate`'s bootstrap) appends and reads, nothing more.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        GRANT USAGE ON SCHEMA public TO lineage_app;
        GRANT SELECT ON tenants, tenant_settings TO lineage_app;
        GRANT SELECT, INSERT ON provenance, transform_versions TO lineage_app;
        GRANT SELECT, INSERT, DELETE ON context_text TO lineage_app;
    END IF;
END
$$;
"""

DOWNGRADE = """
DROP TABLE context_text;
DROP TABLE tenant_settings;
DROP TABLE transform_versions;
DROP FUNCTION lineage_descendants(text, text[], int);
DROP FUNCTION lineage_ancestors(text, text, int);
DROP TABLE provenance;
DROP FUNCTION provenance_refuse_change();
DROP TABLE tenants;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
