"""The walk down by id in one call: lineage_blast_radius(max_depth, ids, tenant, kind, token,
audit) runs sql/blast_radius.sql's statement for the tenant its token vouches for, with the
request's audit row when given, in one round trip, as lineage_walk_back (0043) does for the
walk-back, and with generic plans.

A walk down from one document or chunk took 2-3.5x the tutorial's recursive statement at p50
(bench.classic_questions' walks down, 1.5M records): four round trips (BEGIN, the tenant's
settings, the query, COMMIT) and a fresh plan each time, for a walk that reads a few dozen
edges. Citus keeps the transaction: its workers learn the tenant only from SET LOCAL.

Revision ID: 0052
Revises: 0051
"""

from alembic import op

from lineage.db import functions

revision = "0052"
down_revision = "0051"
branch_labels = None
depends_on = None

FUNCTIONS = ("lineage_blast_radius",)


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    op.execute("DROP FUNCTION lineage_blast_radius(integer, text[], text, text, text, jsonb)")
