"""The invalidation postings keep each id that is a UUID in 16 bytes.

A postings row listed its ids as text: on a DAG whose ids are UUIDs (36 characters), the id
arrays were 408 of the 552 bytes the postings stored for each record (bench/RESULTS-postings.md),
each id 40 bytes with its header. An id in the canonical form (lowercase hex, hyphenated), as
UUIDs are written by most pipelines, now goes in `context_uuids` (uuid[]), 16 bytes, and prints
back as the same text; any other id stays in `context_ids` (text[]). Either is null when empty.
A read lists both: `unnest(ip.context_uuids::text[] || ip.context_ids)`.

Each postings row that lists a UUID is rewritten once, the others are only read (forced row
security lifted for this transaction alone); VACUUM invalidation_postings afterwards (README,
Upgrading).

Revision ID: 0048
Revises: 0047
"""

from alembic import op

from lineage.db import functions, tenant_rewrite

revision = "0048"
down_revision = "0047"
branch_labels = None
depends_on = None

# The append writes the postings; the downgrade loads the one 0047 loaded again.
FUNCTIONS = ("lineage_append",)
LIFTED = ("tenants", "invalidation_postings")
# One tenant (%1$L) at a time: on Citus each is a router statement. The pattern is the
# append's: uuid's text output is exactly this form, so an id prints back as it came.
UUID = "'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'"
SPLIT = f"""
UPDATE invalidation_postings AS ip
SET context_uuids = (SELECT array_agg(id::uuid ORDER BY id)
                     FROM unnest(ip.context_ids) AS id
                     WHERE id ~ {UUID}),
    context_ids = (SELECT array_agg(id ORDER BY id)
                   FROM unnest(ip.context_ids) AS id
                   WHERE id !~ {UUID})
WHERE ip.tenant_id = %1$L
  AND EXISTS (SELECT 1 FROM unnest(ip.context_ids) AS id WHERE id ~ {UUID})
"""
JOIN = """
UPDATE invalidation_postings AS ip
SET context_ids = ARRAY(SELECT id FROM unnest(ip.context_uuids::text[] || ip.context_ids) AS id
                        ORDER BY id),
    context_uuids = NULL
WHERE ip.tenant_id = %1$L AND ip.context_uuids IS NOT NULL
"""


def upgrade() -> None:
    op.execute("ALTER TABLE invalidation_postings ADD COLUMN context_uuids uuid[]")
    op.execute("ALTER TABLE invalidation_postings ALTER COLUMN context_ids DROP NOT NULL")
    op.execute(tenant_rewrite.each_tenant(SPLIT, LIFTED, update=False))
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    op.execute(tenant_rewrite.each_tenant(JOIN, LIFTED, update=False))
    op.execute("ALTER TABLE invalidation_postings ALTER COLUMN context_ids SET NOT NULL")
    op.execute("ALTER TABLE invalidation_postings DROP COLUMN context_uuids")
    functions.create(op.get_bind(), "0047", FUNCTIONS)
