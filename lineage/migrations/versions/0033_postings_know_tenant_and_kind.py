"""The GIN index of the invalidation postings also holds each record's tenant and kind, as the
terms 'tenant:<id>' and 'kind:<kind>' beside its keys (an expression: the rows do not change).

An invalidation asks for one kind (the answers to drop, the summaries to rebuild) of one tenant;
the postings alone found every record below the key, of every tenant, and each was read from
the table to be filtered out: below an index snapshot, which sits on retrievals, that is every
retrieval, summary, claim and answer of every tenant that named the same snapshot. With the
tenant and kind in the probe, the index returns only the records asked for
(sql/include/posting_probe.sql).

Revision ID: 0033
Revises: 0032
"""

from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


# One statement a call: Citus sends DDL to its workers as the whole query string.
def upgrade() -> None:
    op.execute(
        "CREATE INDEX provenance_postings ON provenance USING gin "
        "((upstream_keys || ARRAY['tenant:' || tenant_id, 'kind:' || kind])) "
        "WITH (fastupdate = off)"
    )
    op.execute("DROP INDEX provenance_upstream")


def downgrade() -> None:
    op.execute(
        "CREATE INDEX provenance_upstream ON provenance USING gin (upstream_keys) "
        "WITH (fastupdate = off)"
    )
    op.execute("DROP INDEX provenance_postings")
