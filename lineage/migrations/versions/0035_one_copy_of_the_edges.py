"""One copy of the edges: the GIN index on parent_ids goes; the walks read provenance_children.

Every walk down probes the tenant's edges in provenance_children by b-tree, and every walk up
reads parent_ids from the record found by its key. The service never read the GIN index: under
row security an index condition needs a leakproof operator, and `@>` and `&&` on arrays are not,
so for lineage_app the index was only a cost: 886 of the 7,596 WAL bytes an appended record
wrote, and 75 stored bytes (bench/RESULTS-write-bytes.md).

Revision ID: 0035
Revises: 0034
"""

from alembic import op

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP INDEX provenance_parent_ids")


def downgrade() -> None:
    op.execute(
        "CREATE INDEX provenance_parent_ids ON provenance USING gin (parent_ids) "
        "WITH (fastupdate = off)"
    )
