"""Root sources as postings, signatures on the record: a record keeps its root sources on its
own row (`root_sources`, `root_depths`, what a child's append carries down) and the postings
list them by source (`invalidation_postings` under the key 'source:' and the source_uri, a row
per kind, depth and month of at most 1,000 ids); it keeps its signature on its row too
(`key_id`, `signature`, written with it, never by UPDATE). The side tables `root_sources` and
`record_signatures` go.

root_sources held a row per record and source with the tenant, the source_uri, the kind and the
record's id as text, and two indexes over them: 2,057 of the 5,048 bytes an appended record
stored (bench/RESULTS-write-bytes.md), 54% of everything at 1.5M records. The postings hold a
source's records of one kind and depth in one row, so a document's blast radius is still one
index range, read depth by depth. record_signatures repeated the tenant, the id and the time
of each record beside its 32-byte signature, under a primary key of its own: 248 bytes a
record, and one more b-tree of random ids for every append to write.

The backfill rewrites each record's row once, as migration 0032 did: roots and signatures are
outside the signed canonical form, so signatures and the verifiable log still verify. The
append-only trigger, the owner's revoked UPDATE and forced row security are lifted for this
transaction alone and put back. VACUUM provenance afterwards (README, Upgrading).

Revision ID: 0036
Revises: 0035
"""

from alembic import op

from lineage.db import functions, tenant_rewrite

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None

# Loaded from lineage/sql/functions/: the append's arguments change, so the old one is dropped;
# retention copies a tombstone's signature from its row. What each loaded before, to go back to.
FUNCTIONS = ("lineage_partitioned_tables", "lineage_append", "lineage_retention_apply")
EARLIER = {"lineage_partitioned_tables": "0034", "lineage_append": "0034",
           "lineage_retention_apply": "0021"}  # fmt: skip
APPEND_0034 = (
    "lineage_append(text, text, text[], text[], text[], text[], text[], text[], text[], "
    "text[], text[], text[], text[], timestamptz[], text[], text[], bytea[], integer[], "
    "text[], integer[], text[], text[])"
)
APPEND_0036 = (
    "lineage_append(text, text, text[], text[], text[], text[], text[], text[], text[], "
    "text[], text[], text[], text[], timestamptz[], text[], text[], bytea[], text[], "
    "text[], text[], text[])"
)

DELEGATE = (
    "SELECT create_distributed_function('{function}'::regprocedure, 'p_tenant', "
    "colocate_with := 'tenants', force_delegation := true)"
)

# One tenant (%1$L) at a time: every read names it, so on Citus each is a router statement.
# Each record once, with its roots, its signature or both; a tombstone holds its source only as
# a keyed hash (docs/privacy.md), so its roots are in the postings alone.
FILL_RECORDS = """
UPDATE provenance AS t
SET root_sources = CASE WHEN t.kind <> 'tombstone' THEN r.sources END,
    root_depths = CASE WHEN t.kind <> 'tombstone' THEN r.depths END,
    key_id = s.key_id, signature = s.signature
FROM (SELECT rs.context_id, rs.created_at,
             array_agg(rs.source_uri ORDER BY rs.source_uri COLLATE "C") AS sources,
             array_agg(rs.depth ORDER BY rs.source_uri COLLATE "C") AS depths
      FROM root_sources AS rs
      WHERE rs.tenant_id = %1$L
      GROUP BY rs.context_id, rs.created_at) AS r
FULL JOIN (SELECT s.context_id, s.created_at, s.key_id, s.signature
           FROM record_signatures AS s
           WHERE s.tenant_id = %1$L) AS s
    ON s.context_id = r.context_id AND s.created_at = r.created_at
WHERE t.tenant_id = %1$L AND t.context_id = coalesce(r.context_id, s.context_id)
  AND t.created_at = coalesce(r.created_at, s.created_at)
"""
FILL_POSTINGS = """
INSERT INTO invalidation_postings (tenant_id, key, kind, depth, created_at, context_ids)
SELECT %1$L, 'source:' || g.source_uri, g.kind, g.depth, min(g.created_at),
       array_agg(g.context_id ORDER BY g.context_id)
FROM (SELECT rs.source_uri, rs.kind, rs.depth, rs.created_at, rs.context_id,
             date_trunc('month', rs.created_at, 'UTC') AS month,
             (row_number() OVER (PARTITION BY rs.source_uri, rs.kind, rs.depth,
                                              date_trunc('month', rs.created_at, 'UTC'))
              - 1) / 1000 AS chunk
      FROM root_sources AS rs
      WHERE rs.tenant_id = %1$L) AS g
GROUP BY g.source_uri, g.kind, g.depth, g.month, g.chunk
"""
# From the postings, which list tombstones too.
UNFILL_ROOTS = """
INSERT INTO root_sources (tenant_id, source_uri, kind, context_id, depth, created_at)
SELECT %1$L, substr(ip.key, length('source:') + 1), ip.kind, p.context_id, ip.depth,
       p.created_at
FROM invalidation_postings AS ip
CROSS JOIN LATERAL unnest(ip.context_ids) AS posting (context_id)
JOIN provenance AS p ON p.tenant_id = %1$L AND p.context_id = posting.context_id
WHERE ip.tenant_id = %1$L AND ip.key LIKE 'source:%%'
"""
UNFILL_SIGNATURES = """
INSERT INTO record_signatures (tenant_id, context_id, key_id, signature, created_at)
SELECT p.tenant_id, p.context_id, p.key_id, p.signature, p.created_at
FROM provenance AS p
WHERE p.tenant_id = %1$L AND p.signature IS NOT NULL
"""


CREATE_RECORD_SIGNATURES = """
CREATE TABLE record_signatures (
    tenant_id  text        NOT NULL,
    context_id text        NOT NULL,
    key_id     text        NOT NULL,
    signature  bytea       NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, context_id, created_at)
) PARTITION BY RANGE (created_at)
"""
CREATE_ROOT_SOURCES = """
CREATE TABLE root_sources (
    tenant_id  text        NOT NULL,
    source_uri text        NOT NULL,
    kind       text        NOT NULL,
    context_id text        NOT NULL,
    depth      integer     NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, source_uri, kind, depth, context_id, created_at)
) PARTITION BY RANGE (created_at)
"""
PARTITIONS = """
SELECT lineage_create_partition('{table}', '{table}' || p.suffix, p.lower, p.upper)
FROM lineage_partitions('provenance') AS p
"""
# As migration 0016 made it: the owner neither updates nor truncates a signature.
APPEND_ONLY = (
    "CREATE TRIGGER record_signatures_append_only BEFORE UPDATE OR DELETE ON record_signatures "
    "FOR EACH ROW EXECUTE FUNCTION lineage_refuse_change()"
)
REVOKE_OWNER = """
DO $$
BEGIN
    EXECUTE format('REVOKE UPDATE, TRUNCATE ON record_signatures FROM %I', current_user);
END $$
"""
# The tables whose forced row security the backfill lifts (the owner reads every tenant's).
LIFTED = ("tenants", "provenance", "root_sources", "record_signatures", "invalidation_postings")


# One statement a call: Citus sends DDL to its workers as the whole query string.
def upgrade() -> None:
    placed = tenant_rewrite.placed()
    op.execute("ALTER TABLE provenance ADD COLUMN root_sources text[]")
    op.execute("ALTER TABLE provenance ADD COLUMN root_depths integer[]")
    op.execute("ALTER TABLE provenance ADD COLUMN key_id text")
    op.execute("ALTER TABLE provenance ADD COLUMN signature bytea")
    op.execute(
        tenant_rewrite.each_tenant(
            FILL_RECORDS + ";;" + FILL_POSTINGS,
            LIFTED,
            update=True,
        )
    )
    op.execute(f"DROP FUNCTION {APPEND_0034}")
    functions.create(op.get_bind(), revision, FUNCTIONS)
    if placed:
        op.execute(DELEGATE.format(function=APPEND_0036))
    op.execute("DROP TABLE root_sources")
    op.execute("DROP TABLE record_signatures")


def _side_table(table: str, create: str, placed: bool) -> None:
    """`table` as earlier migrations made it: month partitions, row security, read by
    lineage_app, and on a placed schema distributed beside the records."""
    op.execute(create)
    op.execute(PARTITIONS.format(table=table))
    op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    tenant = tenant_rewrite.EACH_ROW if placed else tenant_rewrite.ONCE
    op.execute(
        f"CREATE POLICY {table}_tenant ON {table} "
        f"USING (tenant_id = {tenant}) WITH CHECK (tenant_id = {tenant})"
    )
    op.execute(tenant_rewrite.GRANT_SELECT.format(table=table))
    if placed:
        op.execute(
            f"SELECT create_distributed_table('{table}', 'tenant_id', colocate_with => 'tenants')"
        )
    else:
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")


def downgrade() -> None:
    placed = tenant_rewrite.placed()
    _side_table("root_sources", CREATE_ROOT_SOURCES, placed)
    op.execute("CREATE INDEX root_sources_context_id ON root_sources (tenant_id, context_id)")
    _side_table("record_signatures", CREATE_RECORD_SIGNATURES, placed)
    op.execute(REVOKE_OWNER)
    op.execute(
        tenant_rewrite.each_tenant(
            UNFILL_ROOTS + ";;" + UNFILL_SIGNATURES + ";;DELETE FROM invalidation_postings "
            "WHERE tenant_id = %1$L AND key LIKE 'source:%%'",
            LIFTED,
            update=False,
        )
    )
    if not placed:  # Citus keeps no trigger on a distributed table (lineage distribute)
        op.execute(APPEND_ONLY)
        op.execute(
            "ALTER TABLE record_signatures ENABLE ALWAYS TRIGGER record_signatures_append_only"
        )
    op.execute(f"DROP FUNCTION {APPEND_0036}")
    for function, earlier in EARLIER.items():
        functions.create(op.get_bind(), earlier, (function,))
    if placed:
        op.execute(DELEGATE.format(function=APPEND_0034))
    for column in ("signature", "key_id", "root_depths", "root_sources"):
        op.execute(f"ALTER TABLE provenance DROP COLUMN {column}")
