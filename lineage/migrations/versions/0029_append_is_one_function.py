"""Records and the verifiable log are written only through the owner's functions, each for the
tenant its token vouches for:
- lineage_append: a record with its edges, root sources, transform version, signature,
  log-queue row and stream position;
- lineage_log_lock and lineage_log_advance: the log's head, leaves, nodes and queue, the oldest
  queued records in queue order only.
So the application role (what an SQL injection gets) loses its writes on those tables and can
no longer store an unsigned record, sign a stored one again, dequeue a record without its leaf
or move a log head. On Citus each function is distributed by its tenant argument (`lineage
distribute`), so an append is one router call on the tenant's worker, not a plan that reaches
every worker.

Revision ID: 0029
Revises: 0028
"""

from alembic import op

from lineage.db import functions

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

FUNCTIONS = ("lineage_append", "lineage_log_lock", "lineage_log_advance")
# What the application role may no longer do itself.
REVOKED = (
    ("INSERT", "provenance"),
    ("INSERT", "provenance_children"),
    ("INSERT", "root_sources"),
    ("INSERT", "transform_versions"),
    ("INSERT", "record_signatures"),
    ("INSERT", "log_queue"),
    ("INSERT", "events"),
    ("DELETE", "log_queue"),
    ("INSERT", "log_heads"),
    ("UPDATE", "log_heads"),
    ("INSERT", "log_leaves"),
    ("INSERT", "log_nodes"),
)


def _on_app_role(statement: str) -> None:
    op.execute(
        "DO $$ BEGIN IF to_regrole('lineage_app') IS NOT NULL THEN "
        f"EXECUTE '{statement}'; END IF; END $$"
    )


# A schema `lineage distribute` placed already: each function runs on its tenant's worker.
DELEGATE = """
DO $$
DECLARE
    placed boolean := false;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_dist_partition '
                'WHERE logicalrelid = ''public.tenants''::regclass)' INTO placed;
    END IF;
    IF placed THEN
        EXECUTE 'SELECT create_distributed_function(p.oid::regprocedure, ''p_tenant'', '
                'colocate_with := ''tenants'', force_delegation := true) '
                'FROM pg_proc AS p WHERE p.proname IN '
                '(''lineage_append'', ''lineage_log_lock'', ''lineage_log_advance'') '
                'AND p.pronamespace = ''public''::regnamespace';
    END IF;
END $$
"""


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)
    for privilege, table in REVOKED:
        _on_app_role(f"REVOKE {privilege} ON {table} FROM lineage_app")
    op.execute(DELEGATE)


def downgrade() -> None:
    for privilege, table in REVOKED:
        _on_app_role(f"GRANT {privilege} ON {table} TO lineage_app")
    for function in FUNCTIONS:
        op.execute(f"DROP FUNCTION {function}")
