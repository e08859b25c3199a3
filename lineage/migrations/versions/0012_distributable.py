"""One schema for plain PostgreSQL and Citus (distributed by tenant_id, default settings): no
statement trigger, no SQL function naming a distributed table, no foreign key to a reference
table; children found in a tenant-confined edge table; definer functions on a fixed search_path.

Revision ID: 0012
Revises: 0011
"""

import importlib.util
from pathlib import Path

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

UPGRADE = """
-- The tenant row security confines a session to. As the application role with none set, a
-- query raises instead of answering 0 rows (a psql recipe that forgot SET LOCAL would otherwise
-- say a record has no lineage); other roles (the owner's definer functions) see nothing, as
-- before. One plpgsql call: Citus evaluates every function call of an INSERT on the
-- coordinator, each branch of a CASE included. Where a query names its tenant (every sql/
-- file), the planner compares the two once per query, not once per row.
CREATE FUNCTION lineage_session_tenant() RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tenant text := current_setting('lineage.tenant_id', true);
BEGIN
    IF coalesce(tenant, '') = '' AND current_user = 'lineage_app' THEN
        RAISE EXCEPTION 'lineage.tenant_id is not set: row security hides every record'
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'BEGIN; SET LOCAL lineage.tenant_id = ''<tenant>''; then the query';
    END IF;
    RETURN tenant;
END
$$;
DO $$
DECLARE
    policy record;
BEGIN
    FOR policy IN
        SELECT p.tablename, p.policyname FROM pg_policies AS p
        WHERE p.schemaname = current_schema() AND p.policyname = p.tablename || '_tenant'
    LOOP
        EXECUTE format('ALTER POLICY %I ON %I USING (tenant_id = lineage_session_tenant()) '
                       'WITH CHECK (tenant_id = lineage_session_tenant())',
                       policy.policyname, policy.tablename);
    END LOOP;
END
$$;

-- Children of each record, one row per parent edge, derived from parent_ids by append_contexts
-- in the statement that inserts the record. Descendant walks probe its primary key, which leads
-- with tenant_id: a probe never reads another tenant's entries (the GIN index on parent_ids
-- held every tenant's: a tenant with many children under an id slowed every other tenant's
-- walks through it 3-10x), and text equality is leakproof, so row-level security leaves the
-- index usable without a SECURITY DEFINER detour (which Citus cannot run on a worker).
CREATE TABLE provenance_children (
    tenant_id  text NOT NULL,
    parent_id  text NOT NULL,
    context_id text NOT NULL,
    PRIMARY KEY (tenant_id, parent_id, context_id)
);
INSERT INTO provenance_children (tenant_id, parent_id, context_id)
SELECT p.tenant_id, parent.id, p.context_id
FROM provenance AS p CROSS JOIN LATERAL unnest(p.parent_ids) AS parent (id)
ON CONFLICT DO NOTHING;
ALTER TABLE provenance_children ENABLE ROW LEVEL SECURITY;
ALTER TABLE provenance_children FORCE ROW LEVEL SECURITY;
CREATE POLICY provenance_children_tenant ON provenance_children
    USING (tenant_id = lineage_session_tenant())
    WITH CHECK (tenant_id = lineage_session_tenant());

-- The log queue is written by append_contexts too: Citus runs no trigger on a distributed
-- table with its default settings, and no transition table on a shard at all.
DROP TRIGGER provenance_log_queue ON provenance;
DROP FUNCTION log_enqueue();

-- The walks are written out in each sql/ file (a recursive CTE Citus routes to the tenant's
-- shard whole); a SQL function naming provenance cannot run on a worker.
DROP FUNCTION lineage_source_radius(text, text, text, int);
DROP FUNCTION lineage_descendants(text, text[], int);
DROP FUNCTION lineage_ancestors(text, text, int);
DROP FUNCTION lineage_children(text, text[]);
DROP FUNCTION lineage_walk_tenant(text);

-- Definer functions: a fixed search_path (pg_catalog first, pg_temp last) and qualified names,
-- so no function or operator the application role planted is called with the owner's rights.
-- plpgsql, not SQL: Citus refuses a parameterised SQL function that reads its tables.
DROP FUNCTION lineage_key(text);
CREATE FUNCTION lineage_key(p_key_id text)
RETURNS TABLE (tenant_id text, scope text, key_hash bytea, revoked boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    RETURN QUERY
    SELECT k.tenant_id, k.scope, k.key_hash, k.revoked_at IS NOT NULL
    FROM public.api_keys AS k WHERE k.key_id OPERATOR(pg_catalog.=) p_key_id;
END
$$;
DROP FUNCTION log_pending_tenants();
CREATE FUNCTION log_pending_tenants() RETURNS SETOF text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
BEGIN
    RETURN QUERY SELECT DISTINCT q.tenant_id FROM public.log_queue AS q;
END
$$;
REVOKE EXECUTE ON FUNCTION lineage_key(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION log_pending_tenants() FROM PUBLIC;
ALTER FUNCTION lineage_captures(text, text) SET search_path = pg_catalog, public, pg_temp;

-- Keys are looked up by id before any tenant is known, so on Citus api_keys is a reference
-- table, and a reference table may not reference a distributed one: the tenant is checked
-- where keys are made (the service creates them only for the caller's own tenant).
ALTER TABLE api_keys DROP CONSTRAINT api_keys_tenant_id_fkey;

-- Append-only for the owner too, without a trigger (Citus keeps none on a distributed table):
-- the owner gives up its own UPDATE and TRUNCATE (DELETE it keeps for lineage_delete_tenant,
-- the one sanctioned path). The triggers stay where they may (plain PostgreSQL); they also
-- stop a superuser, whom privileges do not.
DO $$
BEGIN
    EXECUTE format('REVOKE UPDATE, TRUNCATE ON provenance, audit_log, record_signatures '
                   'FROM PUBLIC, %I', current_user);
END
$$;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        GRANT SELECT, INSERT ON provenance_children TO lineage_app;
        GRANT EXECUTE ON FUNCTION lineage_key(text), log_pending_tenants() TO lineage_app;
        -- Where public is writable (PostgreSQL 14 and older, and clusters upgraded from them),
        -- the application role could plant functions the owner's code would find.
        REVOKE CREATE ON SCHEMA public FROM lineage_app;
    END IF;
END
$$;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
"""


def _earlier(module_file: str, name: str) -> str:
    """SQL text a former revision defined (the functions and trigger this one replaced)."""
    path = Path(__file__).with_name(module_file)
    spec = importlib.util.spec_from_file_location(f"lineage_revision_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text: str = getattr(module, name)
    return text


def _between(text: str, first: str, last: str) -> str:
    """The statements of `text` from the one starting with `first` to the end of `last`'s."""
    begin = text.index(first)
    end = text.index("$$;", text.index(last, begin)) + len("$$;")
    return text[begin:end]


DOWNGRADE = """
DROP TABLE provenance_children;
DO $$
DECLARE
    policy record;
BEGIN
    FOR policy IN
        SELECT p.tablename, p.policyname FROM pg_policies AS p
        WHERE p.schemaname = current_schema() AND p.policyname = p.tablename || '_tenant'
    LOOP
        EXECUTE format('ALTER POLICY %I ON %I '
                       'USING (tenant_id = current_setting(''lineage.tenant_id'', true)) '
                       'WITH CHECK (tenant_id = current_setting(''lineage.tenant_id'', true))',
                       policy.policyname, policy.tablename);
    END LOOP;
END
$$;
DROP FUNCTION lineage_session_tenant();
DROP FUNCTION lineage_key(text);
DROP FUNCTION log_pending_tenants();
DO $$
BEGIN
    EXECUTE format('GRANT UPDATE, TRUNCATE ON provenance, audit_log, record_signatures TO %I',
                   current_user);
END
$$;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
    first = _earlier("0001_provenance.py", "UPGRADE")
    security = _earlier("0002_security.py", "UPGRADE")
    log = _earlier("0003_verifiable_log.py", "UPGRADE")
    radius = _earlier("0007_descendant_walks.py", "UPGRADE")
    op.execute(
        _between(first, "CREATE FUNCTION lineage_ancestors", "CREATE FUNCTION lineage_ancestors")
    )
    op.execute(
        _between(
            security,
            "CREATE FUNCTION lineage_walk_tenant",
            "CREATE OR REPLACE FUNCTION lineage_descendants",
        )
    )
    op.execute(_between(security, "CREATE FUNCTION lineage_key", "CREATE FUNCTION lineage_key"))
    op.execute(
        _between(
            radius,
            "CREATE FUNCTION lineage_source_radius",
            "CREATE OR REPLACE FUNCTION lineage_children",
        )
    )
    op.execute(
        _between(log, "CREATE FUNCTION log_enqueue", "CREATE FUNCTION log_enqueue")
        + """
CREATE TRIGGER provenance_log_queue AFTER INSERT ON provenance
    REFERENCING NEW TABLE AS appended
    FOR EACH STATEMENT EXECUTE FUNCTION log_enqueue();"""
    )
    op.execute(
        _between(log, "CREATE FUNCTION log_pending_tenants", "CREATE FUNCTION log_pending_tenants")
    )
    op.execute("""
REVOKE EXECUTE ON FUNCTION lineage_key(text), log_pending_tenants() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION lineage_children(text, text[]) FROM PUBLIC;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        GRANT EXECUTE ON FUNCTION lineage_key(text), log_pending_tenants(),
            lineage_children(text, text[]) TO lineage_app;
    END IF;
END
$$;
ALTER TABLE api_keys ADD FOREIGN KEY (tenant_id) REFERENCES tenants;
""")
