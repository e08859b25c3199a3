"""Closing the open partitions reads no rows with appends waiting: `lineage retention set`
first adds to each open partition a CHECK of the bound it is to have, NOT VALID
(lineage_open_partitions_check), validates it in a transaction of its own while appends go on
(lineage_open_partitions_validate), and lineage_partitions_shape's ATTACH trusts it instead of
reading every row under a lock appends wait for, then drops it.

Revision ID: 0024
Revises: 0023
"""

from alembic import op

from lineage.db import functions

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

# Loaded from lineage/sql/functions/.
FUNCTIONS = (
    "lineage_open_partitions_check",
    "lineage_open_partitions_validate",
    "lineage_partitions_shape",
)


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    functions.create(op.get_bind(), "0021", ("lineage_partitions_shape",))
    op.execute("DROP FUNCTION lineage_open_partitions_validate();")
    op.execute("DROP FUNCTION lineage_open_partitions_check(timestamptz, boolean);")
