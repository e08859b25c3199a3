"""A page of records in one call: lineage_list_contexts(tenant, filters..., token, audit) runs
sql/list_contexts.sql's statement for the tenant its token vouches for, with the request's
audit row when given, in one round trip, as lineage_walk_back (0043) and lineage_get_contexts
(0044) do.

A page of GET /v1/contexts (and the check that an impact question's source_uri has records)
was four round trips (BEGIN, the tenant's settings, the query, COMMIT) for one index range.
Citus keeps the transaction: its workers learn the tenant only from SET LOCAL.

Revision ID: 0045
Revises: 0044
"""

from alembic import op

from lineage.db import functions

revision = "0045"
down_revision = "0044"
branch_labels = None
depends_on = None

FUNCTIONS = ("lineage_list_contexts",)


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    op.execute(
        "DROP FUNCTION lineage_list_contexts(text, text, text, text, text, text, timestamptz, "
        "timestamptz, timestamptz, text, bigint, text, jsonb)"
    )
