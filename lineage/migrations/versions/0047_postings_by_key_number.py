"""The invalidation postings name their key by its number in the tenant's invalidation_keys.

A postings row spelled its key out ('source:' and a source_uri, 'transform_version:…'): about
40 of the 210 bytes of a row on the tutorial DAG, where most rows list one or two records (a
document's postings gain a row at each append that derives from it). The records already keep
their keys by number (migration 0038); the postings now do too, and a read finds the key's
number once, by the unique key of invalidation_keys.

Each postings row is rewritten once, its text key emptied in the same write (forced row security
lifted for this transaction alone); VACUUM invalidation_postings afterwards (README, Upgrading).

Revision ID: 0047
Revises: 0046
"""

from alembic import op

from lineage.db import functions, tenant_rewrite

revision = "0047"
down_revision = "0046"
branch_labels = None
depends_on = None

# The append writes the postings; the downgrade loads the one 0041 loaded again.
FUNCTIONS = ("lineage_append",)
LIFTED = ("tenants", "invalidation_postings", "invalidation_keys")
# One tenant (%1$L) at a time, every read naming it: on Citus each is a router statement.
# A key no record numbered (postings written around lineage_append), numbered after the rest.
NUMBER_MISSING = """
INSERT INTO invalidation_keys (tenant_id, key_no, key)
SELECT %1$L,
       coalesce((SELECT max(k.key_no) FROM invalidation_keys AS k WHERE k.tenant_id = %1$L), 0)
       + row_number() OVER (ORDER BY m.key),
       m.key
FROM (SELECT DISTINCT ip.key FROM invalidation_postings AS ip
      WHERE ip.tenant_id = %1$L
        AND NOT EXISTS (SELECT 1 FROM invalidation_keys AS k
                        WHERE k.tenant_id = %1$L AND k.key = ip.key)) AS m
"""
FILL_NUMBERS = """
UPDATE invalidation_postings AS ip SET key_no = k.key_no, key = NULL
FROM invalidation_keys AS k
WHERE ip.tenant_id = %1$L AND k.tenant_id = %1$L AND k.key = ip.key
"""
FILL_KEYS = """
UPDATE invalidation_postings AS ip SET key = k.key, key_no = NULL
FROM invalidation_keys AS k
WHERE ip.tenant_id = %1$L AND k.tenant_id = %1$L AND k.key_no = ip.key_no
"""


def upgrade() -> None:
    op.execute("ALTER TABLE invalidation_postings ADD COLUMN key_no integer")
    op.execute("ALTER TABLE invalidation_postings ALTER COLUMN key DROP NOT NULL")
    op.execute(
        tenant_rewrite.each_tenant(";;".join((NUMBER_MISSING, FILL_NUMBERS)), LIFTED, update=False)
    )
    op.execute("DROP INDEX invalidation_postings_key")
    op.execute("ALTER TABLE invalidation_postings DROP COLUMN key")
    op.execute("ALTER TABLE invalidation_postings ALTER COLUMN key_no SET NOT NULL")
    op.execute(
        "CREATE INDEX invalidation_postings_key "
        "ON invalidation_postings (tenant_id, key_no, kind, depth)"
    )
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    op.execute("ALTER TABLE invalidation_postings ADD COLUMN key text")
    op.execute("ALTER TABLE invalidation_postings ALTER COLUMN key_no DROP NOT NULL")
    op.execute(tenant_rewrite.each_tenant(FILL_KEYS, LIFTED, update=False))
    op.execute("DROP INDEX invalidation_postings_key")
    op.execute("ALTER TABLE invalidation_postings DROP COLUMN key_no")
    op.execute("ALTER TABLE invalidation_postings ALTER COLUMN key SET NOT NULL")
    op.execute(
        "CREATE INDEX invalidation_postings_key "
        "ON invalidation_postings (tenant_id, key, kind, depth)"
    )
    functions.create(op.get_bind(), "0041", FUNCTIONS)
