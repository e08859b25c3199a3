"""Retention waits for the verifiable log: a partition past the period whose records are still
queued for the log (log_queue) is kept until the log has taken them in, and the receipt names it
in months_waiting. Dropped first, records appended with an old created_at (a backfill, an
import) and expired before the log's next round were never logged and left no leaf.

Revision ID: 0020
Revises: 0019
"""

from alembic import op

from lineage.db import functions

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

FUNCTIONS = ("lineage_retention_apply",)


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    functions.create(op.get_bind(), "0019", FUNCTIONS)
