"""Other sessions' statements hidden from the application role.

Every service session is lineage_app, and PostgreSQL shows a role the statement text of its own
sessions in pg_stat_activity: an SQL injection polling it would read the `SET LOCAL
lineage.tenant_token` of a concurrent request, and with it another tenant. The two functions
that return statement text are revoked from PUBLIC in this database (the owner, a superuser,
still sees them; `lineage distribute` does the same on every worker). Only a superuser may
change them: a migration run by another role warns and leaves them as they are.

Revision ID: 0017
Revises: 0016
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

ACTIVITY_FUNCTIONS = (
    "pg_catalog.pg_stat_get_activity(integer), pg_catalog.pg_stat_get_backend_activity(integer)"
)

CHANGE = """
DO $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        {verb} EXECUTE ON FUNCTION {functions} {direction} PUBLIC;
    ELSE
        RAISE WARNING 'not a superuser: lineage_app can still read its other sessions'' '
            'statements (tenant tokens) in pg_stat_activity; a superuser should run: '
            '{verb} EXECUTE ON FUNCTION {functions} {direction} PUBLIC';
    END IF;
END
$$;
"""


def upgrade() -> None:
    op.execute(CHANGE.format(verb="REVOKE", direction="FROM", functions=ACTIVITY_FUNCTIONS))


def downgrade() -> None:
    op.execute(CHANGE.format(verb="GRANT", direction="TO", functions=ACTIVITY_FUNCTIONS))
