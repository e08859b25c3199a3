"""The captured-text rule in the tenant policy of context_text, so that it holds on every Citus
shard as on plain PostgreSQL.

It was a restrictive policy of its own, context_text_captured, which Citus recreates permissive
on the shards (so text was captured with capture off). Now the one permissive policy's WITH
CHECK asks both: the row is the transaction's tenant's, and its record's class of text is
captured for that tenant.

Revision ID: 0014
Revises: 0013
"""

from alembic import op

from lineage.db import functions

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# Each a statement of its own: Citus sends a policy's DDL to the workers as the whole query
# string, which they refuse when it holds several commands; and, on a schema already
# distributed, it refuses function DDL after DDL it ran on the shards in parallel in the same
# transaction (on plain PostgreSQL the setting is an unused placeholder).
SEQUENTIAL = "SET LOCAL citus.multi_shard_modify_mode = 'sequential'"
DROP_RESTRICTIVE = "DROP POLICY context_text_captured ON context_text"
WITH_CHECK = (
    "ALTER POLICY context_text_tenant ON context_text WITH CHECK "
    "(tenant_id = lineage_session_tenant() AND lineage_captures(tenant_id, context_id))"
)
TENANT_ONLY = (
    "ALTER POLICY context_text_tenant ON context_text WITH CHECK "
    "(tenant_id = lineage_session_tenant())"
)
RESTRICTIVE = (
    "CREATE POLICY context_text_captured ON context_text AS RESTRICTIVE FOR INSERT "
    "WITH CHECK (lineage_captures(tenant_id, context_id))"
)

# Is the record's class of text captured for its tenant? The mapping of
# lineage.services.privacy.capture_switch: queries; answers and claims; else source text.
# plpgsql, not SQL (Citus refuses a parameterised SQL function reading its tables). On a shard
# the policy runs it on the worker, where its query is a distributed one that Citus refuses by
# default inside a query on a shard; allowed for this function alone, since it reads only the
# row's own tenant, whose shards are colocated with the row's (local, and moved together). Set
# only where the citus extension is installed: elsewhere it is an unknown placeholder, which
# since PostgreSQL 15 only a superuser may set (lineage.db.functions.for_this_database).
CAPTURES = """
CREATE FUNCTION lineage_captures(p_tenant_id text, p_context_id text) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public, pg_temp
SET citus.allow_nested_distributed_execution = 'on'
AS $$
BEGIN
    RETURN coalesce((
        SELECT CASE
                   WHEN p.kind OPERATOR(pg_catalog.=) 'query' THEN s.capture_query_text
                   WHEN p.kind IN ('claim', 'answer') THEN s.capture_answer_text
                   ELSE s.capture_source_text
               END
        FROM public.provenance AS p
        JOIN public.tenant_settings AS s ON s.tenant_id OPERATOR(pg_catalog.=) p.tenant_id
        WHERE p.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
          AND p.context_id OPERATOR(pg_catalog.=) p_context_id
    ), false);
END
$$
"""

# As 0006 made it (with 0012's search_path).
SQL_CAPTURES = """
DROP FUNCTION lineage_captures(text, text);
CREATE FUNCTION lineage_captures(p_tenant_id text, p_context_id text) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, public, pg_temp AS $$
    SELECT coalesce((
        SELECT CASE
                   WHEN p.kind = 'query' THEN s.capture_query_text
                   WHEN p.kind IN ('claim', 'answer') THEN s.capture_answer_text
                   ELSE s.capture_source_text
               END
        FROM provenance AS p
        JOIN tenant_settings AS s ON s.tenant_id = p.tenant_id
        WHERE p.tenant_id = p_tenant_id AND p.context_id = p_context_id
    ), false)
$$
"""


def upgrade() -> None:
    op.execute(SEQUENTIAL)
    op.execute(DROP_RESTRICTIVE)
    op.execute("DROP FUNCTION lineage_captures(text, text)")
    op.execute(functions.for_this_database(op.get_bind(), CAPTURES))
    op.execute(WITH_CHECK)


def downgrade() -> None:
    op.execute(SEQUENTIAL)
    op.execute(TENANT_ONLY)
    op.execute(SQL_CAPTURES)
    op.execute(RESTRICTIVE)
