"""The application role confined to what the service does: the tenant it sets must be vouched
for by an HMAC under a key only the owner can read (an SQL injection that sets
lineage.tenant_id itself sees nothing); keys are made and revoked through definer functions that
take the vouched tenant and never un-revoke; the app role writes no api_keys row directly.

Revision ID: 0013
Revises: 0012
"""

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

UPGRADE = """
-- The key the service vouches for a transaction's tenant with: lineage.tenant_token must be
-- the HMAC-SHA256 of lineage.tenant_id under it. The owner reads it (the service connects as
-- the owner once to fetch it, then logs in as lineage_app); lineage_app cannot. No tenant_id
-- column: on Citus it stays a local table, and `lineage distribute` copies it to each worker,
-- where the row-security policies verify the token too. The pads are kept so that the check
-- needs no XOR on bytea: HMAC(k, m) = sha256(k ^ opad || sha256(k ^ ipad || m)).
CREATE TABLE tenant_vouching_key (
    only_row  boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    key       bytea   NOT NULL CHECK (length(key) = 32),
    inner_pad bytea   NOT NULL CHECK (length(inner_pad) = 64),
    outer_pad bytea   NOT NULL CHECK (length(outer_pad) = 64)
);
-- No grant on it: only its owner (and a superuser) reads it.
DO $$
DECLARE
    -- 244 bits from the server's strong random source (two version-4 UUIDs).
    secret bytea := sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text, 'UTF8'));
    padded bytea := secret || decode(repeat('00', 32), 'hex');
    inner_pad bytea := padded;
    outer_pad bytea := padded;
BEGIN
    FOR i IN 0..63 LOOP
        inner_pad := set_byte(inner_pad, i, get_byte(padded, i) # 54);
        outer_pad := set_byte(outer_pad, i, get_byte(padded, i) # 92);
    END LOOP;
    INSERT INTO tenant_vouching_key (key, inner_pad, outer_pad)
    VALUES (secret, inner_pad, outer_pad);
END
$$;

-- Whether `p_token` is the service's HMAC of `p_tenant`. Both sides are hashed before they are
-- compared, so the comparison's time says nothing about the expected token.
CREATE FUNCTION lineage_tenant_vouched(p_tenant text, p_token text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    pads record;
BEGIN
    SELECT k.inner_pad, k.outer_pad INTO pads FROM public.tenant_vouching_key AS k;
    IF pads IS NULL OR p_token IS NULL THEN
        RETURN false;
    END IF;
    RETURN sha256(convert_to(p_token, 'UTF8')) OPERATOR(pg_catalog.=) sha256(convert_to(
        encode(sha256(pads.outer_pad OPERATOR(pg_catalog.||) sha256(
            pads.inner_pad OPERATOR(pg_catalog.||) convert_to(p_tenant, 'UTF8'))), 'hex'),
        'UTF8'));
END
$$;
REVOKE EXECUTE ON FUNCTION lineage_tenant_vouched(text, text) FROM PUBLIC;

-- The tenant row security confines a session to. As the application role, it must be set
-- and vouched for (lineage.tenant_token); an owner's session (psql, the owner's functions)
-- names its tenant as before.
CREATE OR REPLACE FUNCTION lineage_session_tenant() RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tenant text := current_setting('lineage.tenant_id', true);
BEGIN
    IF current_user = 'lineage_app' THEN
        IF coalesce(tenant, '') = '' THEN
            RAISE EXCEPTION 'lineage.tenant_id is not set: row security hides every record'
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'BEGIN; SET LOCAL lineage.tenant_id = ''<tenant>''; '
                             'SET LOCAL lineage.tenant_token = ''<token>''; then the query';
        END IF;
        IF NOT public.lineage_tenant_vouched(tenant, current_setting('lineage.tenant_token', true))
        THEN
            RAISE EXCEPTION 'lineage.tenant_id is not vouched for by lineage.tenant_token'
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'the service sets both; `lineage tenant token <tenant>` prints '
                             'the token for psql';
        END IF;
    END IF;
    RETURN tenant;
END
$$;

-- The tenant a definer function acts for: the transaction's, vouched for whoever the caller.
CREATE FUNCTION lineage_vouched_tenant() RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tenant text := current_setting('lineage.tenant_id', true);
BEGIN
    IF coalesce(tenant, '') = ''
       OR NOT public.lineage_tenant_vouched(tenant, current_setting('lineage.tenant_token', true))
    THEN
        RAISE EXCEPTION 'lineage.tenant_id is not set or not vouched for by lineage.tenant_token'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN tenant;
END
$$;
REVOKE EXECUTE ON FUNCTION lineage_vouched_tenant() FROM PUBLIC;

-- A new key, for the vouched tenant only (a tenant that exists); the secret's hash, never it.
CREATE FUNCTION lineage_key_create(p_key_id text, p_scope text, p_key_hash bytea, p_label text)
RETURNS TABLE (key_id text, tenant_id text, scope text, label text, created_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tenant text := public.lineage_vouched_tenant();
BEGIN
    IF NOT EXISTS (SELECT 1 FROM public.tenants AS t
                   WHERE t.tenant_id OPERATOR(pg_catalog.=) tenant) THEN
        RAISE EXCEPTION 'no tenant %', tenant USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN QUERY
    INSERT INTO public.api_keys AS k (key_id, tenant_id, scope, key_hash, label)
    VALUES (p_key_id, tenant, p_scope, p_key_hash, nullif(p_label, ''))
    RETURNING k.key_id, k.tenant_id, k.scope, k.label, k.created_at;
END
$$;

-- Revoke one of the vouched tenant's keys; a revoked key stays revoked (the first time kept).
-- No row: no such key for this tenant.
CREATE FUNCTION lineage_key_revoke(p_key_id text)
RETURNS TABLE (key_id text, revoked_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tenant text := public.lineage_vouched_tenant();
BEGIN
    UPDATE public.api_keys AS k SET revoked_at = pg_catalog.now()
    WHERE k.tenant_id OPERATOR(pg_catalog.=) tenant AND k.key_id OPERATOR(pg_catalog.=) p_key_id
      AND k.revoked_at IS NULL;
    RETURN QUERY
    SELECT k.key_id, k.revoked_at FROM public.api_keys AS k
    WHERE k.tenant_id OPERATOR(pg_catalog.=) tenant AND k.key_id OPERATOR(pg_catalog.=) p_key_id;
END
$$;
REVOKE EXECUTE ON FUNCTION lineage_key_create(text, text, bytea, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION lineage_key_revoke(text) FROM PUBLIC;

-- Definer functions search pg_catalog and pg_temp only (every table name is qualified): with
-- public on the path, a function the application role planted there (where public is
-- writable) could be a better match than pg_catalog's for an unqualified call.
ALTER FUNCTION lineage_key(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION log_pending_tenants() SET search_path = pg_catalog, pg_temp;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        -- Un-revoking a key or minting one for another tenant took only these.
        REVOKE INSERT, UPDATE ON api_keys FROM lineage_app;
        GRANT EXECUTE ON FUNCTION lineage_key_create(text, text, bytea, text),
            lineage_key_revoke(text), lineage_tenant_vouched(text, text),
            lineage_vouched_tenant() TO lineage_app;
    END IF;
END
$$;
"""

DOWNGRADE = """
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        GRANT INSERT ON api_keys TO lineage_app;
        GRANT UPDATE (revoked_at) ON api_keys TO lineage_app;
    END IF;
END
$$;
ALTER FUNCTION lineage_key(text) SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION log_pending_tenants() SET search_path = pg_catalog, public, pg_temp;
DROP FUNCTION lineage_key_revoke(text);
DROP FUNCTION lineage_key_create(text, text, bytea, text);
DROP FUNCTION lineage_vouched_tenant();
CREATE OR REPLACE FUNCTION lineage_session_tenant() RETURNS text
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
DROP FUNCTION lineage_tenant_vouched(text, text);
DROP TABLE tenant_vouching_key;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
