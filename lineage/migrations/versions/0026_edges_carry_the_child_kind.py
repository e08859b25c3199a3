"""Each parent edge carries its child's kind, in the edge key's index (INCLUDE), so that an
invalidation walk knows what it reached from the index it walks: the ids queries read no record,
the records queries only the kind asked for. Before, every reached record was read by id for
its kind (1.2 of 3.25 s at 250k records, bench/RESULTS-invalidation.md). A record's kind never
changes (records are append-only), so the copy cannot go stale.

The edges are derived data: they are written anew from the records, as migration 0012 first
wrote them (the owner may delete and insert them, not update them).

Revision ID: 0026
Revises: 0025
"""

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

KEY = "tenant_id, parent_id, context_id, created_at"

# The owner rewrites every tenant's edges: row security must not confine it.
UNCONFINED = """
ALTER TABLE provenance NO FORCE ROW LEVEL SECURITY;
ALTER TABLE provenance_children NO FORCE ROW LEVEL SECURITY;
"""
CONFINED = """
ALTER TABLE provenance FORCE ROW LEVEL SECURITY;
ALTER TABLE provenance_children FORCE ROW LEVEL SECURITY;
"""

UPGRADE = f"""
ALTER TABLE provenance_children ADD COLUMN kind text;
DELETE FROM provenance_children;
INSERT INTO provenance_children (tenant_id, parent_id, context_id, created_at, kind)
SELECT DISTINCT p.tenant_id, parent.id, p.context_id, p.created_at, p.kind
FROM provenance AS p CROSS JOIN LATERAL unnest(p.parent_ids) AS parent (id);
ALTER TABLE provenance_children ALTER COLUMN kind SET NOT NULL;
ALTER TABLE provenance_children DROP CONSTRAINT provenance_children_pkey;
ALTER TABLE provenance_children ADD CONSTRAINT provenance_children_pkey
    PRIMARY KEY ({KEY}) INCLUDE (kind);
"""

DOWNGRADE = f"""
ALTER TABLE provenance_children DROP CONSTRAINT provenance_children_pkey;
ALTER TABLE provenance_children DROP COLUMN kind;
ALTER TABLE provenance_children ADD CONSTRAINT provenance_children_pkey PRIMARY KEY ({KEY});
"""


def _run(*scripts: str) -> None:
    # One statement a call: Citus sends DDL to its workers as the whole query string, and they
    # refuse a string of several commands.
    for script in scripts:
        for statement in script.split(";\n"):
            if statement.strip():
                op.execute(statement)


def upgrade() -> None:
    _run(UNCONFINED, UPGRADE, CONFINED)


def downgrade() -> None:
    _run(DOWNGRADE)
