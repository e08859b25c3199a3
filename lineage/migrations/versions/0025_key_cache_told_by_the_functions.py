"""Revoking a key and deleting a tenant notify every server's key cache from the functions
themselves (lineage_key_revoke, lineage_delete_tenant), so that a revocation from psql counts
from the next request too; the notification was sent by sql/key_revoke.sql and
sql/tenant_delete.sql alone, and a key revoked by calling the function stayed accepted by every
running server process until it restarted.

Revision ID: 0025
Revises: 0024
"""

from alembic import op

from lineage.db import functions

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

FUNCTIONS = ("lineage_key_revoke", "lineage_delete_tenant")


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    functions.create(op.get_bind(), "0018", FUNCTIONS)
