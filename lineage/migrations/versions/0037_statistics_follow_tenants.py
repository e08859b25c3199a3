"""Statistics follow each tenant's growth: the service's background round analyzes the tables a
tenant's walks, appends and log plan on once some tenant's records have doubled (from 1,000 up)
since the service last did.

Statistics taken before a tenant had records (beside another tenant they counted) take the new
tenant's rows for one: its walk-back then read every record of the tenant at each level, a batch
append into it took 82 s instead of 7.7 s, and sequencing its log 251 s instead of 17 s.
Autovacuum analyzes a table once a tenth of it changed, which a new tenant beside large ones
never reaches. `statistics_analyzed` keeps each tenant's record count as of the service's last
ANALYZE, on the coordinator under Citus (it has no tenant_id column, so `lineage distribute`
leaves it local, and lineage_delete_tenant deletes the tenant's row by name); the application
role reaches it, and ANALYZE, only through the owner's functions. The owner reads every
tenant's counter (FORCE confines it too unless a superuser).

Revision ID: 0037
Revises: 0036
"""

from alembic import op

from lineage.db import functions

revision = "0037"
down_revision = "0036"
branch_labels = None
depends_on = None

# The list first: lineage_analyze checks its argument against it.
NEW = (
    "lineage_statistics_tables",
    "lineage_statistics_due",
    "lineage_analyze",
    "lineage_statistics_analyzed",
)
# Deletes the tenant's row of statistics_analyzed too.
CHANGED = ("lineage_delete_tenant",)
FUNCTIONS = NEW + CHANGED

CREATE = """
CREATE TABLE statistics_analyzed (
    tenant      text        PRIMARY KEY,
    records     bigint      NOT NULL CHECK (records >= 0),
    analyzed_at timestamptz NOT NULL
)
"""

OWNER_READS_COUNTERS = """
DO $$
BEGIN
    EXECUTE format(
        'CREATE POLICY tenant_counters_statistics ON tenant_counters FOR SELECT TO %I '
        'USING (true)', current_user
    );
END
$$
"""


def upgrade() -> None:
    op.execute(CREATE)
    op.execute(OWNER_READS_COUNTERS)
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    functions.create(op.get_bind(), "0031", CHANGED)
    for function in reversed(NEW):
        op.execute(f"DROP FUNCTION {function}")
    op.execute("DROP POLICY tenant_counters_statistics ON tenant_counters")
    op.execute("DROP TABLE statistics_analyzed")
