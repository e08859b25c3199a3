"""The partitioned tables listed once: lineage_partitioned_tables(), which the functions that
make, close and drop partitions (lineage_add_partitions, lineage_partitions_shape,
lineage_retention_apply) read instead of each writing the four names out. Bodies otherwise
as 0019 and 0020 left them.

Revision ID: 0021
Revises: 0020
"""

from alembic import op

from lineage.db import functions

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

# Loaded from lineage/sql/functions/, in this order: the list before its callers.
FUNCTIONS = (
    "lineage_partitioned_tables",
    "lineage_add_partitions",
    "lineage_partitions_shape",
    "lineage_retention_apply",
)


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    functions.create(op.get_bind(), "0019", ("lineage_add_partitions", "lineage_partitions_shape"))
    functions.create(op.get_bind(), "0020", ("lineage_retention_apply",))
    op.execute("DROP FUNCTION lineage_partitioned_tables();")
