"""Root sources: which documents each record derives from, so a blast radius by source is
one index lookup (issue 9).

Revision ID: 0005
Revises: 0004
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

UPGRADE = """
-- Derived from parent_ids by append_records, outside the canonical form: one row for each
-- record and each source_uri of the roots (records without parents) it derives from, with its
-- minimal depth below a root of that source. Written in the transaction that appends the
-- record, so it needs no foreign key (one probe less per row).
-- B-tree, not GIN over an array: row-level security keeps an index usable only when its
-- operator is leakproof, and text equality is while array containment is not.
CREATE TABLE root_sources (
    tenant_id  text NOT NULL,
    source_uri text NOT NULL,
    kind       text NOT NULL,
    context_id text NOT NULL,
    depth      int  NOT NULL,
    -- The blast radius of a source, of one kind or all, is one range of this index.
    PRIMARY KEY (tenant_id, source_uri, kind, context_id) INCLUDE (depth)
);
-- A new record's parents' rows, read by append_records.
CREATE INDEX root_sources_context_id ON root_sources (tenant_id, context_id);

-- Records appended before this revision, a level at a time: a record is filled once all its
-- parents are.
DO $$
DECLARE
    filled bigint;
BEGIN
    INSERT INTO root_sources (tenant_id, source_uri, kind, context_id, depth)
    SELECT tenant_id, source_uri, kind, context_id, 0
    FROM provenance WHERE parent_ids = '{}';
    LOOP
        INSERT INTO root_sources (tenant_id, source_uri, kind, context_id, depth)
        SELECT c.tenant_id, p.source_uri, c.kind, c.context_id, min(p.depth) + 1
        FROM provenance AS c
        JOIN root_sources AS p
          ON p.tenant_id = c.tenant_id AND p.context_id = ANY (c.parent_ids)
        WHERE c.parent_ids <> '{}'
          AND NOT EXISTS (SELECT 1 FROM root_sources AS done
                          WHERE done.tenant_id = c.tenant_id AND done.context_id = c.context_id)
          AND NOT EXISTS (SELECT 1 FROM unnest(c.parent_ids) AS parent (id)
                          WHERE NOT EXISTS (SELECT 1 FROM root_sources AS r
                                            WHERE r.tenant_id = c.tenant_id
                                              AND r.context_id = parent.id))
        GROUP BY c.tenant_id, p.source_uri, c.kind, c.context_id;
        GET DIAGNOSTICS filled = ROW_COUNT;
        EXIT WHEN filled = 0;
    END LOOP;
END
$$;

ALTER TABLE root_sources ENABLE ROW LEVEL SECURITY;
ALTER TABLE root_sources FORCE ROW LEVEL SECURITY;
CREATE POLICY root_sources_tenant ON root_sources
    USING (tenant_id = current_setting('lineage.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('lineage.tenant_id', true));

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        GRANT SELECT, INSERT ON root_sources TO lineage_app;
    END IF;
END
$$;
"""

DOWNGRADE = """
DROP TABLE root_sources;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
