"""Root sources as postings: a record keeps its root sources on its own row (`root_sources`,
`root_depths`, what a child's append carries down) and the postings list them by source
(`invalidation_postings` under the key 'source:' and the source_uri, a row per kind, depth and
month of at most 1,000 ids). The side table `root_sources` goes.

root_sources held a row per record and source with the tenant, the source_uri, the kind and the
record's id as text, and two indexes over them: 2,057 of the 5,048 bytes an appended record
stored (bench/RESULTS-write-bytes.md), 54% of everything at 1.5M records. The postings hold a
source's records of one kind and depth in one row, so a document's blast radius is still one
index range, read depth by depth.

The backfill rewrites each record's row once, as migration 0032 did: roots are derived, outside
the signed canonical form, so signatures and the verifiable log still verify. The append-only
trigger, the owner's revoked UPDATE and forced row security are lifted for this transaction
alone and put back. VACUUM provenance afterwards (README, Upgrading).

Revision ID: 0036
Revises: 0035
"""

from alembic import op

from lineage.db import functions

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None

# Loaded from lineage/sql/functions/: the append's arguments change, so the old one is dropped.
FUNCTIONS = ("lineage_partitioned_tables", "lineage_append")
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

# Where `lineage distribute` placed the schema already (asked where Citus is installed).
PLACED = (
    "SELECT EXISTS (SELECT 1 FROM pg_dist_partition "
    "WHERE logicalrelid = 'public.tenants'::regclass)"
)
DELEGATE = (
    "SELECT create_distributed_function('{function}'::regprocedure, 'p_tenant', "
    "colocate_with := 'tenants', force_delegation := true)"
)

# One tenant (%1$L) at a time: every read names it, so on Citus each is a router statement.
FILL_RECORDS = """
UPDATE provenance AS t
SET root_sources = r.sources, root_depths = r.depths
FROM (SELECT rs.context_id, rs.created_at,
             array_agg(rs.source_uri ORDER BY rs.source_uri COLLATE "C") AS sources,
             array_agg(rs.depth ORDER BY rs.source_uri COLLATE "C") AS depths
      FROM root_sources AS rs
      WHERE rs.tenant_id = %1$L
      GROUP BY rs.context_id, rs.created_at) AS r
WHERE t.tenant_id = %1$L AND t.context_id = r.context_id AND t.created_at = r.created_at
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
UNFILL_ROOTS = """
INSERT INTO root_sources (tenant_id, source_uri, kind, context_id, depth, created_at)
SELECT p.tenant_id, r.source_uri, p.kind, p.context_id, r.depth, p.created_at
FROM provenance AS p
CROSS JOIN LATERAL unnest(p.root_sources, p.root_depths) AS r (source_uri, depth)
WHERE p.tenant_id = %1$L
"""


def _lifted(body: str, tables: tuple[str, ...], *, update: bool) -> str:
    """`body` (statements run for each tenant, %1$L) with forced row security lifted on
    `tables` and, when `update`, provenance's append-only trigger and revoked UPDATE."""
    lift = restore = ""
    for table in tables:
        lift += (
            f"IF (SELECT relforcerowsecurity FROM pg_class WHERE oid = '{table}'::regclass) "
            f"THEN forced := forced || '{table}'::text; "
            f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY; END IF;\n"
        )
        restore += (
            f"IF '{table}' = ANY (forced) THEN "
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY; END IF;\n"
        )
    if update:
        lift += (
            "IF guarded THEN ALTER TABLE provenance DISABLE TRIGGER provenance_append_only; "
            "END IF;\nEXECUTE format('GRANT UPDATE ON provenance TO %I', current_user);\n"
        )
        restore += (
            "EXECUTE format('REVOKE UPDATE ON provenance FROM %I', current_user);\n"
            "IF guarded THEN ALTER TABLE provenance ENABLE ALWAYS TRIGGER "
            "provenance_append_only; END IF;\n"
        )
    statements = "".join(
        f"EXECUTE format($each${statement}$each$, tenant);\n" for statement in body.split(";;")
    )
    return f"""
DO $$
DECLARE
    forced text[] := '{{}}';
    guarded boolean := EXISTS (SELECT 1 FROM pg_trigger
                               WHERE tgrelid = 'provenance'::regclass
                                 AND tgname = 'provenance_append_only');
    tenant text;
BEGIN
{lift}
    FOR tenant IN SELECT t.tenant_id FROM tenants AS t LOOP
{statements}
    END LOOP;
{restore}
END
$$
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
ROOT_PARTITIONS = """
SELECT lineage_create_partition('root_sources', 'root_sources' || p.suffix, p.lower, p.upper)
FROM lineage_partitions('provenance') AS p
"""
GRANT_ROOT_SOURCES = """
DO $$
BEGIN
    IF to_regrole('lineage_app') IS NOT NULL THEN
        GRANT SELECT ON root_sources TO lineage_app;
    END IF;
END $$
"""
# Once a statement on PostgreSQL (migration 0022); per row where Citus takes no subquery.
ONCE = "(SELECT lineage_session_tenant())"
EACH_ROW = "lineage_session_tenant()"


def _placed() -> bool:
    bind = op.get_bind()
    citus = bind.exec_driver_sql("SELECT to_regclass('pg_dist_partition')").scalar()
    return citus is not None and bool(bind.exec_driver_sql(PLACED).scalar())


# One statement a call: Citus sends DDL to its workers as the whole query string.
def upgrade() -> None:
    placed = _placed()
    op.execute("ALTER TABLE provenance ADD COLUMN root_sources text[]")
    op.execute("ALTER TABLE provenance ADD COLUMN root_depths integer[]")
    op.execute(
        _lifted(
            FILL_RECORDS + ";;" + FILL_POSTINGS,
            ("tenants", "provenance", "root_sources", "invalidation_postings"),
            update=True,
        )
    )
    op.execute(f"DROP FUNCTION {APPEND_0034}")
    functions.create(op.get_bind(), revision, FUNCTIONS)
    if placed:
        op.execute(DELEGATE.format(function=APPEND_0036))
    op.execute("DROP TABLE root_sources")


def downgrade() -> None:
    placed = _placed()
    op.execute(CREATE_ROOT_SOURCES)
    op.execute(ROOT_PARTITIONS)
    op.execute("CREATE INDEX root_sources_context_id ON root_sources (tenant_id, context_id)")
    op.execute("ALTER TABLE root_sources ENABLE ROW LEVEL SECURITY")
    tenant = EACH_ROW if placed else ONCE
    op.execute(
        "CREATE POLICY root_sources_tenant ON root_sources "
        f"USING (tenant_id = {tenant}) WITH CHECK (tenant_id = {tenant})"
    )
    op.execute(GRANT_ROOT_SOURCES)
    if placed:
        op.execute(
            "SELECT create_distributed_table('root_sources', 'tenant_id', "
            "colocate_with => 'tenants')"
        )
    else:
        op.execute("ALTER TABLE root_sources FORCE ROW LEVEL SECURITY")
    op.execute(
        _lifted(
            UNFILL_ROOTS + ";;DELETE FROM invalidation_postings "
            "WHERE tenant_id = %1$L AND key LIKE 'source:%%'",
            ("tenants", "provenance", "root_sources", "invalidation_postings"),
            update=False,
        )
    )
    op.execute(f"DROP FUNCTION {APPEND_0036}")
    functions.create(op.get_bind(), "0034", FUNCTIONS)
    if placed:
        op.execute(DELEGATE.format(function=APPEND_0034))
    op.execute("ALTER TABLE provenance DROP COLUMN root_depths")
    op.execute("ALTER TABLE provenance DROP COLUMN root_sources")
