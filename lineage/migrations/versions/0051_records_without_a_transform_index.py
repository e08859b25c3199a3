"""The records lose their b-tree on (tenant, transform, transform_version), which no read uses.

Every read by transform version goes through `provenance_transform_version` (tenant, version),
the postings or `transform_versions` (each transform's versions, first seen); no statement in
sql/ filters the records by transform. The index only cost each append a b-tree insert a
record: about 85 bytes of WAL, 3% of what an append writes (bench/RESULTS-write-bytes.md).

Revision ID: 0051
Revises: 0050
"""

from alembic import op

revision = "0051"
down_revision = "0050"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP INDEX provenance_transform")


def downgrade() -> None:
    op.execute(
        "CREATE INDEX provenance_transform ON provenance (tenant_id, transform, transform_version)"
    )
