"""Every provenance partition takes its unique index of ids as its replica identity, and so does
each one lineage_create_partition makes from now on. provenance has no primary key (a
partitioned table's key must hold created_at), so a Citus shard move by logical replication, the
runbook's online rebalance, move and tenant isolation, stopped with "no REPLICA IDENTITY or
PRIMARY KEY" on provenance_p_open and ran only with 'block_writes', which stops ingest.

A Citus worker added without `lineage distribute` run since (it copies the tenant vouching key
to the workers) now refuses its tenants with "this node has no tenant vouching key" and a hint,
an operator's error the service answers with 503, where it failed with "relation does not
exist" (a 500).

Revision ID: 0030
Revises: 0029
"""

from alembic import op

from lineage.db import functions

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

FUNCTIONS = ("lineage_create_partition", "lineage_tenant_vouched")
# Each provenance partition with its unique index of ids.
PARTITIONS = """
SELECT c.relname, i.relname
FROM pg_inherits AS h
JOIN pg_class AS c ON c.oid = h.inhrelid
JOIN pg_index AS x ON x.indrelid = c.oid AND x.indisunique
JOIN pg_class AS i ON i.oid = x.indexrelid
WHERE h.inhparent = 'provenance'::regclass
ORDER BY c.relname
"""


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)
    for partition, index in op.get_bind().exec_driver_sql(PARTITIONS).fetchall():
        op.execute(f'ALTER TABLE "{partition}" REPLICA IDENTITY USING INDEX "{index}"')


def downgrade() -> None:
    functions.create(op.get_bind(), "0019", ("lineage_create_partition",))
    functions.create(op.get_bind(), "0018", ("lineage_tenant_vouched",))
    for partition, _ in op.get_bind().exec_driver_sql(PARTITIONS).fetchall():
        op.execute(f'ALTER TABLE "{partition}" REPLICA IDENTITY DEFAULT')
