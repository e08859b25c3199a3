"""Each leaf of the verifiable log keeps its record's created_at, so that a record gone from the
store can be told apart: created before the tenant's expiry horizon (tenant_expiry), retention
dropped it; created after, it was removed around the service, and `lineage log verify` fails.
Leaves logged before this revision have none: for them the horizon alone decides, as before.

Revision ID: 0023
Revises: 0022
"""

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE log_leaves ADD COLUMN created_at timestamptz")


def downgrade() -> None:
    op.execute("ALTER TABLE log_leaves DROP COLUMN created_at")
