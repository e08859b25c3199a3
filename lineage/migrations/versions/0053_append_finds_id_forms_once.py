"""The append finds each new id's form (a UUID kept in 16 bytes, or text) once, for the edges
and the postings alike: lineage_append matched each id against the UUID pattern twice, once in
each of the two statements that keep ids compactly (0048, 0050).

Revision ID: 0053
Revises: 0052
"""

from alembic import op

from lineage.db import functions

revision = "0053"
down_revision = "0052"
branch_labels = None
depends_on = None

FUNCTIONS = ("lineage_append",)


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    functions.create(op.get_bind(), "0050", FUNCTIONS)
