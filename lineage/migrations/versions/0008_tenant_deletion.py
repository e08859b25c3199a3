"""Tenant deletion: the one path past the append-only triggers, and the operator's audit trail
that keeps its receipts (issue 20).

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

UPGRADE = """
-- What the operator did to whole tenants: no tenant_id, so it outlives the tenants it names.
-- Only the owner reads or writes it; append-only like every audit.
CREATE TABLE operator_audit (
    audit_id bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    operator text        NOT NULL DEFAULT session_user,
    action   text        NOT NULL,
    target   text        NOT NULL,
    detail   jsonb       NOT NULL DEFAULT '{}'
);
CREATE TRIGGER operator_audit_append_only BEFORE UPDATE OR DELETE ON operator_audit
    FOR EACH ROW EXECUTE FUNCTION lineage_refuse_change();
CREATE TRIGGER operator_audit_no_truncate BEFORE TRUNCATE ON operator_audit
    FOR EACH STATEMENT EXECUTE FUNCTION lineage_refuse_change();
ALTER TABLE operator_audit ENABLE ALWAYS TRIGGER operator_audit_append_only;
ALTER TABLE operator_audit ENABLE ALWAYS TRIGGER operator_audit_no_truncate;

-- A tenant whose deletion is under way, for the length of the deleting transaction only
-- (lineage_delete_tenant removes its row before it returns): the append-only triggers let
-- that tenant's rows be deleted and nothing else. A table, not a setting, so that a trigger
-- running on another node sees it too.
CREATE TABLE tenant_deleting (
    tenant_id text PRIMARY KEY
);

CREATE OR REPLACE FUNCTION provenance_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE'
       AND EXISTS (SELECT 1 FROM tenant_deleting AS d WHERE d.tenant_id = OLD.tenant_id) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'provenance is append-only: % is refused', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'record what changed as a new record derived from the old one';
END
$$;

CREATE OR REPLACE FUNCTION lineage_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- to_jsonb: a table without tenant_id (operator_audit) is never deleted from.
    IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM tenant_deleting AS d
                                    WHERE d.tenant_id = to_jsonb(OLD) ->> 'tenant_id') THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '% is append-only: % is refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;

-- Every row of one tenant, in every table of this schema with a tenant_id column (found in the
-- catalog, so a table added later is covered), referencing tables before the ones they
-- reference, in one transaction; then a receipt in operator_audit: the rows deleted per table,
-- the tenant's last signed checkpoint (what a holder of its proofs can still check against),
-- the time. Returns the receipt. The owner's alone: the application role may not run it.
CREATE FUNCTION lineage_delete_tenant(p_tenant_id text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    remaining regclass[];
    chosen regclass;
    deleted bigint;
    counts jsonb := '{}';
    last_checkpoint jsonb;
    receipt jsonb;
BEGIN
    PERFORM set_config('lineage.tenant_id', p_tenant_id, true);
    IF NOT EXISTS (SELECT 1 FROM tenants WHERE tenant_id = p_tenant_id) THEN
        RAISE EXCEPTION 'no tenant %', p_tenant_id USING ERRCODE = 'no_data_found';
    END IF;
    SELECT jsonb_build_object('tree_size', c.tree_size,
                              'root_hash', encode(c.root_hash, 'base64'),
                              'signed_at', c.signed_at, 'note', c.note)
    INTO last_checkpoint
    FROM log_checkpoints AS c WHERE c.tenant_id = p_tenant_id
    ORDER BY c.tree_size DESC LIMIT 1;
    INSERT INTO tenant_deleting (tenant_id) VALUES (p_tenant_id);
    remaining := ARRAY(
        SELECT c.oid::regclass
        FROM pg_class AS c
        JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attname = 'tenant_id'
                              AND NOT a.attisdropped
        WHERE c.relnamespace = to_regnamespace(current_schema())
          AND c.relkind IN ('r', 'p') AND NOT c.relispartition
          AND c.oid <> 'tenant_deleting'::regclass
    );
    WHILE cardinality(remaining) > 0 LOOP
        SELECT t INTO chosen
        FROM unnest(remaining) AS t
        WHERE NOT EXISTS (SELECT 1 FROM pg_constraint AS f
                          WHERE f.contype = 'f' AND f.confrelid = t AND f.conrelid <> t
                            AND f.conrelid = ANY (remaining))
        ORDER BY t::text LIMIT 1;
        IF chosen IS NULL THEN
            RAISE EXCEPTION 'the foreign keys among % form a cycle', remaining;
        END IF;
        EXECUTE format('DELETE FROM %s WHERE tenant_id = $1', chosen) USING p_tenant_id;
        GET DIAGNOSTICS deleted = ROW_COUNT;
        counts := counts || jsonb_build_object(chosen::text, deleted);
        remaining := array_remove(remaining, chosen);
    END LOOP;
    DELETE FROM tenant_deleting WHERE tenant_id = p_tenant_id;
    receipt := jsonb_build_object('tenant_id', p_tenant_id, 'rows', counts,
                                  'last_checkpoint', last_checkpoint,
                                  'deleted_at', clock_timestamp());
    INSERT INTO operator_audit (action, target, detail)
    VALUES ('tenant_delete', p_tenant_id, receipt);
    RETURN receipt;
END
$$;
REVOKE EXECUTE ON FUNCTION lineage_delete_tenant(text) FROM PUBLIC;
"""

DOWNGRADE = """
DROP FUNCTION lineage_delete_tenant(text);
CREATE OR REPLACE FUNCTION lineage_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % is refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE OR REPLACE FUNCTION provenance_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'provenance is append-only: % is refused', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'record what changed as a new record derived from the old one';
END
$$;
DROP TABLE tenant_deleting;
DROP TABLE operator_audit;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
