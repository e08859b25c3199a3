"""Records by id and a trace's records in one call: lineage_get_contexts(tenant, ids, token,
audit) and lineage_trace_contexts(tenant, trace_id, token, audit) run sql/get_contexts.sql's
and sql/trace_contexts.sql's statements for the tenant its token vouches for, with the
request's audit row when given, in one round trip, as lineage_walk_back (0043) does for the
walk-back.

A record read by id (GET /v1/contexts/{id}, an impact page's records) was four round trips
(BEGIN, the tenant's settings, the query, COMMIT) for one primary-key probe, and a trace's
records (GET /v1/traces/{id}) four for one index range. Citus keeps the transaction: its
workers learn the tenant only from SET LOCAL.

Revision ID: 0044
Revises: 0043
"""

from alembic import op

from lineage.db import functions

revision = "0044"
down_revision = "0043"
branch_labels = None
depends_on = None

# The three one-call reads begin alike, in lineage_read_begin (lineage_walk_back of 0043 too).
FUNCTIONS = (
    "lineage_read_begin",
    "lineage_walk_back",
    "lineage_get_contexts",
    "lineage_trace_contexts",
)


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    functions.create(op.get_bind(), "0043", ("lineage_walk_back",))
    op.execute(
        "DROP FUNCTION lineage_get_contexts(text, text[], text, jsonb); "
        "DROP FUNCTION lineage_trace_contexts(text, text, text, jsonb); "
        "DROP FUNCTION lineage_read_begin(text, text, jsonb)"
    )
