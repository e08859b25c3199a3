"""Each record keeps its invalidation postings: the transform versions and index snapshots of
itself and of everything upstream of it, each with the least depth below a record that has it
(`upstream_keys` 'transform_version:chunker@1.4', 'index_snapshot:idx_2026_08_01', with
`upstream_depths` beside them), written by the append from its parents' postings. With a GIN
index on them, what depends on an old chunker or index snapshot is one index read instead of
a walk down every edge below it (which at 1.5M records was slower than the tutorial's naive
SQL and ran past the default statement timeout).

Records stored before this revision have none (NULL; the table is append-only, so they are not
rewritten), nor do their descendants: a tenant with any such record is answered by the walk,
as before (sql/invalidate_*; the partial index finds one in a probe).

Revision ID: 0028
Revises: 0027
"""

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


# One statement a call: Citus sends DDL to its workers as the whole query string.
def upgrade() -> None:
    op.execute(
        "ALTER TABLE provenance ADD COLUMN upstream_keys text[], "
        "ADD COLUMN upstream_depths integer[]"
    )
    op.execute(
        "CREATE INDEX provenance_upstream ON provenance USING gin (upstream_keys) "
        "WITH (fastupdate = off)"
    )
    op.execute(
        "CREATE INDEX provenance_upstream_unknown ON provenance (tenant_id) "
        "WHERE upstream_keys IS NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX provenance_upstream_unknown")
    op.execute("DROP INDEX provenance_upstream")
    op.execute("ALTER TABLE provenance DROP COLUMN upstream_keys, DROP COLUMN upstream_depths")
