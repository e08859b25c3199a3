"""root_sources keyed by (source, kind, depth, context_id): a source's records of one kind lie
in the order a blast radius lists them (nearest first), so a hot document's answers stream from
the index with no sort, and whether records lie deeper than a walk's max_depth is one probe.
Before, depth was an INCLUDE column: listing a document's 205,549 answers at 10M records sorted
them by depth (180 of 354 ms, an external merge at the default work_mem) behind a window over
every row for `truncated`.

A record has one row per source (its least depth), so the key stays unique.

Revision ID: 0027
Revises: 0026
"""

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


DROP = "ALTER TABLE root_sources DROP CONSTRAINT root_sources_pkey"
ADD = "ALTER TABLE root_sources ADD CONSTRAINT root_sources_pkey PRIMARY KEY "


# One statement a call: Citus sends DDL to its workers as the whole query string.
def upgrade() -> None:
    op.execute(DROP)
    op.execute(ADD + "(tenant_id, source_uri, kind, depth, context_id, created_at)")


def downgrade() -> None:
    op.execute(DROP)
    op.execute(ADD + "(tenant_id, source_uri, kind, context_id, created_at) INCLUDE (depth)")
