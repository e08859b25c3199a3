"""The walk-back in one call: lineage_walk_back(context, tenant, max_depth, token, audit) runs
sql/walk_back.sql's statement for the tenant its token vouches for, with the request's audit
row when given, in one round trip.

A walk-back through the service was four round trips (BEGIN, the tenant's settings, the query,
COMMIT) and twice its statement's time (bench.walk_service); the function binds the tenant
for the walk alone and checks its token once, in the implicit transaction of its one
statement. Citus keeps the transaction: its workers learn the tenant only from SET LOCAL.

Revision ID: 0043
Revises: 0042
"""

from alembic import op

from lineage.db import functions

revision = "0043"
down_revision = "0042"
branch_labels = None
depends_on = None

FUNCTIONS = ("lineage_audit_append", "lineage_walk_back")


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    op.execute(
        "DROP FUNCTION lineage_walk_back(text, text, integer, text, jsonb); "
        "DROP FUNCTION lineage_audit_append(text, timestamptz, text, text, text, jsonb)"
    )
