"""The parent edges keyed by (tenant, parent) alone: a walk down probes nothing else.

provenance_children's primary key held every column of an edge (tenant, parent, child, month,
and the child's kind as payload), as large as the table itself: 530 of the 936 bytes an
appended record stored for its edges (bench/RESULTS-write-bytes.md). Keyed by tenant and parent
only, the b-tree deduplicates: a parent's key is stored once with its children's row pointers.
A walk reads the child and its kind from the edge's row, as fast at 200k records
(bench/RESULTS-edges.md). Nothing needs the key's uniqueness: only lineage_append writes edges,
once for each record it inserts. Without a key, each partition replicates whole rows (REPLICA
IDENTITY FULL, as invalidation_postings' do): a Citus shard move by logical replication needs a
replica identity, and edges are only ever inserted, or deleted with their tenant.

Revision ID: 0046
Revises: 0045
"""

from alembic import op

from lineage.db import functions

revision = "0046"
down_revision = "0045"
branch_labels = None
depends_on = None

# The partition maker: a new month's edges replicate whole rows too.
FUNCTIONS = ("lineage_create_partition",)
PARTITIONS = """
SELECT c.relname FROM pg_inherits AS h JOIN pg_class AS c ON c.oid = h.inhrelid
WHERE h.inhparent = 'provenance_children'::regclass ORDER BY c.relname
"""


def replica_identity(identity: str) -> None:
    for (partition,) in op.get_bind().exec_driver_sql(PARTITIONS).fetchall():
        op.execute(f'ALTER TABLE "{partition}" REPLICA IDENTITY {identity}')


def upgrade() -> None:
    op.execute(
        "CREATE INDEX provenance_children_parent ON provenance_children (tenant_id, parent_id)"
    )
    op.execute("ALTER TABLE provenance_children DROP CONSTRAINT provenance_children_pkey")
    replica_identity("FULL")
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    functions.create(op.get_bind(), "0034", FUNCTIONS)
    replica_identity("DEFAULT")
    op.execute(
        "ALTER TABLE provenance_children ADD CONSTRAINT provenance_children_pkey "
        "PRIMARY KEY (tenant_id, parent_id, context_id, created_at) INCLUDE (kind)"
    )
    op.execute("DROP INDEX provenance_children_parent")
