"""The capture switches without a column-level grant, which Citus does not carry to the shards
(so on Citus no switch could be changed: `lineage tenant settings`, PATCH /v1/tenant/settings).

The application role may now UPDATE tenant_settings as a whole; the one column it must never
change, text_hash_key, is held by a foreign key to tenant_text_keys, which only the owner writes
(tenant creation, bundle import): the role can set it to nothing but its tenant's key.

Revision ID: 0015
Revises: 0014
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

UPGRADE = """
-- The key (or, during a bundle import, keys) a tenant's query, claim and answer hashes may be
-- keyed with, as the owner registered it.
CREATE TABLE tenant_text_keys (
    tenant_id     text  NOT NULL REFERENCES tenants,
    text_hash_key bytea NOT NULL,
    PRIMARY KEY (tenant_id, text_hash_key)
);
INSERT INTO tenant_text_keys (tenant_id, text_hash_key)
SELECT tenant_id, text_hash_key FROM tenant_settings;
ALTER TABLE tenant_settings ADD CONSTRAINT tenant_settings_text_hash_key_registered
    FOREIGN KEY (tenant_id, text_hash_key) REFERENCES tenant_text_keys (tenant_id, text_hash_key);
ALTER TABLE tenant_text_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenant_text_keys FORCE ROW LEVEL SECURITY;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        GRANT SELECT ON tenant_text_keys TO lineage_app;
        GRANT UPDATE ON tenant_settings TO lineage_app;
    END IF;
END
$$;
"""

# Statements of their own: Citus sends a policy's DDL to the workers as the whole query string.
POLICY = (
    "CREATE POLICY tenant_text_keys_tenant ON tenant_text_keys "
    "USING (tenant_id = lineage_session_tenant()) WITH CHECK (tenant_id = lineage_session_tenant())"
)

# Citus refuses a column-level GRANT or REVOKE on a distributed table (its shards never had
# this one), so on a schema already distributed it is changed on the coordinator alone.
SWITCHES_GRANT = """
SET LOCAL citus.enable_ddl_propagation = 'off';
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        {verb} UPDATE (capture_source_text, capture_query_text, capture_answer_text)
            ON tenant_settings {direction} lineage_app;
    END IF;
END
$$;
SET LOCAL citus.enable_ddl_propagation = 'on';
"""

DOWNGRADE = """
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        REVOKE UPDATE ON tenant_settings FROM lineage_app;
    END IF;
END
$$;
ALTER TABLE tenant_settings DROP CONSTRAINT tenant_settings_text_hash_key_registered;
DROP TABLE tenant_text_keys;
"""


def upgrade() -> None:
    op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")
    op.execute(UPGRADE)
    op.execute(POLICY)
    op.execute(SWITCHES_GRANT.format(verb="REVOKE", direction="FROM"))


def downgrade() -> None:
    op.execute("SET LOCAL citus.multi_shard_modify_mode = 'sequential'")
    op.execute(DOWNGRADE)
    op.execute(SWITCHES_GRANT.format(verb="GRANT", direction="TO"))
