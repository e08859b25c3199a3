"""Every function from its file in sql/functions/, where its current body is kept in one place.

The bodies are those 0017 left, so the schema is unchanged and the downgrade has nothing to undo.
A later revision that changes a function edits its file, loads it by name, and freezes the text
this revision loaded in migrations/functions/0018/ (lineage/db/functions.py).

Revision ID: 0018
Revises: 0017
"""

from alembic import op

from lineage.db import functions

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

FUNCTIONS = (
    "lineage_add_partitions",
    "lineage_captures",
    "lineage_delete_tenant",
    "lineage_key",
    "lineage_key_create",
    "lineage_key_revoke",
    "lineage_refuse_change",
    "lineage_retention_apply",
    "lineage_session_tenant",
    "lineage_tenant_vouched",
    "lineage_vouched_tenant",
    "log_pending_tenants",
    "provenance_refuse_change",
)


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    pass  # 0017's functions are these, body and privileges alike
