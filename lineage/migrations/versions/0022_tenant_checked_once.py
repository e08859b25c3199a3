"""Row security checks the session's tenant once a statement, not once a row: every tenant policy
compares tenant_id with `(SELECT lineage_session_tenant())`, which the planner runs once as an
InitPlan. Called bare, the function (a vouched tenant's HMAC checked in plpgsql) ran for every
row an INSERT wrote, about 20 us each, eleven rows a record (the record, its parent edges, its
root sources, its signature, its log and event rows): most of a batch append's time.

Citus refuses a subquery in a distributed table's policy: a table already distributed keeps
the per-row form, and `lineage distribute` puts it back on a table before it places it.

Revision ID: 0022
Revises: 0021
"""

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

# Each a statement of its own: Citus sends a policy's DDL to the workers as the whole query
# string, which they refuse when it holds several commands.
SEQUENTIAL = "SET LOCAL citus.multi_shard_modify_mode = 'sequential'"
TENANT_POLICIES = """
SELECT p.tablename FROM pg_policies AS p
WHERE p.schemaname = current_schema() AND p.policyname = p.tablename || '_tenant'
ORDER BY p.tablename
"""
# What Citus has placed, where the extension is installed.
DISTRIBUTED = "SELECT logicalrelid::regclass::text FROM pg_dist_partition"
ONCE = "(SELECT lineage_session_tenant())"
EACH_ROW = "lineage_session_tenant()"


def _set_policies(tenant: str) -> None:
    op.execute(SEQUENTIAL)
    bind = op.get_bind()
    placed: set[str] = set()
    if bind.exec_driver_sql("SELECT to_regclass('pg_dist_partition')").scalar() is not None:
        placed = {table for (table,) in bind.exec_driver_sql(DISTRIBUTED).fetchall()}
    for (table,) in bind.exec_driver_sql(TENANT_POLICIES).fetchall():
        if table in placed:
            continue
        with_check = f"tenant_id = {tenant}"
        if table == "context_text":  # migration 0014's captured-text rule
            with_check += " AND lineage_captures(tenant_id, context_id)"
        op.execute(
            f"ALTER POLICY {table}_tenant ON {table} "
            f"USING (tenant_id = {tenant}) WITH CHECK ({with_check})"
        )


def upgrade() -> None:
    _set_policies(ONCE)


def downgrade() -> None:
    _set_policies(EACH_ROW)
