"""Invalidation postings in a table of their own, read by b-tree: `invalidation_postings`, a row
per tenant, key, kind and depth (and month, at most 1,000 ids a row) listing the records below
a record with that key, written by lineage_append beside each record's upstream_keys.

The service reads as lineage_app under forced row security, where PostgreSQL takes a qual as
an index condition only if its operator is leakproof: `@>` on arrays is not, so the GIN index
of migration 0033 was never used by the service (a scan of the tenant's records with the probe
as a filter); text equality is, so a b-tree on (tenant_id, key, kind, depth) is. The GIN index
goes; upstream_keys stay (the append reads parents' postings from them).

Partitioned by created_at like root_sources, each row in its records' month, so retention
drops a month's postings with its records; tenant deletion and `lineage distribute` find the
table by its tenant_id column. Partitions replicate whole rows (REPLICA IDENTITY FULL): rows
have no key, and a Citus shard move by logical replication needs an identity.

Revision ID: 0034
Revises: 0033
"""

from alembic import op

from lineage.db import functions

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None

# Loaded from lineage/sql/functions/, the list and partition maker before the partitions.
FUNCTIONS = ("lineage_partitioned_tables", "lineage_create_partition", "lineage_append")

CREATE = """
CREATE TABLE invalidation_postings (
    tenant_id   text        NOT NULL,
    key         text        NOT NULL,
    kind        text        NOT NULL,
    depth       integer     NOT NULL,
    created_at  timestamptz NOT NULL,
    context_ids text[]      NOT NULL
) PARTITION BY RANGE (created_at)
"""

# A partition for each of provenance's, with its bounds and suffix.
PARTITIONS = """
SELECT lineage_create_partition('invalidation_postings', 'invalidation_postings' || p.suffix,
                                p.lower, p.upper)
FROM lineage_partitions('provenance') AS p
"""

# Every record's postings as the append writes them: by key, kind, depth and month (partitions
# are whole months), at most 1,000 ids a row. Run by the owner, row security lifted meanwhile.
BACKFILL = """
DO $$
DECLARE
    forced boolean := (SELECT relforcerowsecurity FROM pg_class
                       WHERE oid = 'provenance'::regclass);
BEGIN
    IF forced THEN
        ALTER TABLE provenance NO FORCE ROW LEVEL SECURITY;
    END IF;
    INSERT INTO invalidation_postings (tenant_id, key, kind, depth, created_at, context_ids)
    SELECT g.tenant_id, g.key, g.kind, g.depth, min(g.created_at), array_agg(g.context_id)
    FROM (SELECT p.tenant_id, up.key, p.kind, up.depth, p.created_at, p.context_id,
                 date_trunc('month', p.created_at, 'UTC') AS month,
                 (row_number() OVER (PARTITION BY p.tenant_id, up.key, p.kind, up.depth,
                                                  date_trunc('month', p.created_at, 'UTC'))
                  - 1) / 1000 AS chunk
          FROM provenance AS p
          CROSS JOIN LATERAL unnest(p.upstream_keys, p.upstream_depths) AS up (key, depth)
          WHERE p.upstream_keys IS NOT NULL) AS g
    GROUP BY g.tenant_id, g.key, g.kind, g.depth, g.month, g.chunk;
    IF forced THEN
        ALTER TABLE provenance FORCE ROW LEVEL SECURITY;
    END IF;
END
$$
"""

# Where `lineage distribute` placed the schema already (asked where Citus is installed).
PLACED = (
    "SELECT EXISTS (SELECT 1 FROM pg_dist_partition "
    "WHERE logicalrelid = 'public.tenants'::regclass)"
)
# Once a statement on PostgreSQL (migration 0022); per row where Citus takes no subquery.
ONCE = "(SELECT lineage_session_tenant())"
EACH_ROW = "lineage_session_tenant()"

GRANT = """
DO $$
BEGIN
    IF to_regrole('lineage_app') IS NOT NULL THEN
        GRANT SELECT ON invalidation_postings TO lineage_app;
    END IF;
END $$
"""

GIN = (
    "CREATE INDEX provenance_postings ON provenance USING gin "
    "((upstream_keys || ARRAY['tenant:' || tenant_id, 'kind:' || kind])) "
    "WITH (fastupdate = off)"
)


# One statement a call: Citus sends DDL to its workers as the whole query string.
def upgrade() -> None:
    bind = op.get_bind()
    citus = bind.exec_driver_sql("SELECT to_regclass('pg_dist_partition')").scalar()
    placed = citus is not None and bool(bind.exec_driver_sql(PLACED).scalar())
    functions.create(bind, revision, FUNCTIONS)
    op.execute(CREATE)
    op.execute(PARTITIONS)
    op.execute("ALTER TABLE invalidation_postings ENABLE ROW LEVEL SECURITY")
    tenant = EACH_ROW if placed else ONCE
    op.execute(
        "CREATE POLICY invalidation_postings_tenant ON invalidation_postings "
        f"USING (tenant_id = {tenant}) WITH CHECK (tenant_id = {tenant})"
    )
    op.execute(GRANT)
    if placed:  # on its tenants' shards, row security not forced (lineage.db.distribute)
        op.execute(
            "SELECT create_distributed_table('invalidation_postings', 'tenant_id', "
            "colocate_with => 'tenants')"
        )
    op.execute(BACKFILL)
    op.execute(
        "CREATE INDEX invalidation_postings_key ON invalidation_postings "
        "(tenant_id, key, kind, depth)"
    )
    if not placed:
        op.execute("ALTER TABLE invalidation_postings FORCE ROW LEVEL SECURITY")
    op.execute("DROP INDEX provenance_postings")


def downgrade() -> None:
    op.execute(GIN)
    functions.create(op.get_bind(), "0029", ("lineage_append",))
    functions.create(op.get_bind(), "0030", ("lineage_create_partition",))
    functions.create(op.get_bind(), "0021", ("lineage_partitioned_tables",))
    op.execute("DROP TABLE invalidation_postings")
