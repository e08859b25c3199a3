"""The service's background round merges each tenant's small postings rows.

An append writes a postings row per key, kind, depth and month, so a key that gains a record
in every append (a popular document, the current chunker) gains a row of a few ids each time.
On the 10M bench the hottest document's postings were 489,975 rows of 2.5 ids: its read visits a
row per 2.5 ids, and each row stores its tenant, key, kind, depth and index entry again.
lineage_postings_merge_keys(tenant, keys) merges a key's rows of fewer than 100 ids into rows of
1,000;
lineage_postings_merge(tenant, records) does so for the keys the tenant's next records are posted
under, and its 'postings_merged' counter keeps how far it got; lineage_postings_pending() names
the tenants it has not caught up with.

Nothing is rewritten here: an installation's existing rows are merged by the background round,
which passes each tenant's records from its first.

Revision ID: 0049
Revises: 0048
"""

from alembic import op

from lineage.db import functions, tenant_rewrite

revision = "0049"
down_revision = "0048"
branch_labels = None
depends_on = None

FUNCTIONS = ("lineage_postings_pending", "lineage_postings_merge_keys", "lineage_postings_merge")
COUNTERS = "tenant_counters_counter_check"
LIFTED = ("tenants", "tenant_counters")
FORGET_MERGED = "DELETE FROM tenant_counters WHERE tenant_id = %1$L AND counter = 'postings_merged'"


def upgrade() -> None:
    op.execute(f"ALTER TABLE tenant_counters DROP CONSTRAINT {COUNTERS}")
    op.execute(
        f"ALTER TABLE tenant_counters ADD CONSTRAINT {COUNTERS} "
        "CHECK (counter IN ('events', 'audit', 'postings_merged'))"
    )
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    op.execute("DROP FUNCTION lineage_postings_merge(text, integer)")
    op.execute("DROP FUNCTION lineage_postings_merge_keys(text, integer[])")
    op.execute("DROP FUNCTION lineage_postings_pending()")
    op.execute(tenant_rewrite.each_tenant(FORGET_MERGED, LIFTED, update=False))
    op.execute(f"ALTER TABLE tenant_counters DROP CONSTRAINT {COUNTERS}")
    op.execute(
        f"ALTER TABLE tenant_counters ADD CONSTRAINT {COUNTERS} "
        "CHECK (counter IN ('events', 'audit'))"
    )
