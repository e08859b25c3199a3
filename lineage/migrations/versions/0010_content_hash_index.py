"""Records by content hash: OTLP intake links a retrieved document that carries no id to the
chunk a pipeline recorded with derive() over the same text (sql/newest_by_content_hash.sql).

Revision ID: 0010
Revises: 0009
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX provenance_content_hash ON provenance (tenant_id, content_hash, created_at)"
    )


def downgrade() -> None:
    op.execute("DROP INDEX provenance_content_hash")
