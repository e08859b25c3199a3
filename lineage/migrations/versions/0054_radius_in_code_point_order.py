"""Walks list their records and ids by depth, then by id in code point order (COLLATE "C"),
whatever the database's collation: lineage_walk_back and lineage_blast_radius reload with
their statements' new ORDER BY (the other walks are files in sql/, read as they are).

Under a linguistic collation (ICU, en_US) the radius came sorted one way in SQL while the
paged radius (GET /v1/impact/page) found its cursor's place by comparing ids in Python, in
code point order: a page could skip records or list them twice. Code point order is also the
cheaper sort: a byte comparison, with abbreviated keys (the hottest document's 115,973 ids
sorted in about a fifth less time on a C.UTF-8 database, where the two orders are the same).
Nothing is rewritten: only the two functions' bodies change.

Revision ID: 0054
Revises: 0053
"""

from alembic import op

from lineage.db import functions

revision = "0054"
down_revision = "0053"
branch_labels = None
depends_on = None

FUNCTIONS = ("lineage_walk_back", "lineage_blast_radius")


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    functions.create(op.get_bind(), "0044", ("lineage_walk_back",))
    functions.create(op.get_bind(), "0052", ("lineage_blast_radius",))
