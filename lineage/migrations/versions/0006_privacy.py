"""Privacy: admins turn text capture on and off; the database refuses text not switched on.

Revision ID: 0006
Revises: 0005
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

UPGRADE = """
-- Is the record's class of text captured for its tenant? The same mapping as
-- lineage.services.privacy.capture_switch: queries, answers, claims; else source text.
CREATE FUNCTION lineage_captures(p_tenant_id text, p_context_id text) RETURNS boolean
LANGUAGE sql STABLE AS $$
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
$$;

-- Behind the service's own check: even a direct INSERT stores no text a tenant did not opt in to.
CREATE POLICY context_text_captured ON context_text AS RESTRICTIVE FOR INSERT
    WITH CHECK (lineage_captures(tenant_id, context_id));

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        -- The switches only: never text_hash_key, which keys the tenant's text hashes.
        GRANT UPDATE (capture_source_text, capture_query_text, capture_answer_text)
            ON tenant_settings TO lineage_app;
    END IF;
END
$$;
"""

DOWNGRADE = """
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        REVOKE UPDATE (capture_source_text, capture_query_text, capture_answer_text)
            ON tenant_settings FROM lineage_app;
    END IF;
END
$$;
DROP POLICY context_text_captured ON context_text;
DROP FUNCTION lineage_captures(text, text);
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
