"""What migrations that rewrite every tenant's rows share: whether `lineage distribute` placed
the schema on Citus already, and one block that runs statements for each tenant in turn with
forced row security (and, for an UPDATE of records, the append-only guard) lifted.
"""

from alembic import op

# Where `lineage distribute` placed the schema already (asked where Citus is installed).
PLACED = (
    "SELECT EXISTS (SELECT 1 FROM pg_dist_partition "
    "WHERE logicalrelid = 'public.tenants'::regclass)"
)

# Once a statement on PostgreSQL (migration 0022); per row where Citus takes no subquery.
ONCE = "(SELECT lineage_session_tenant())"
EACH_ROW = "lineage_session_tenant()"
# Read by the application role, where it exists.
GRANT_SELECT = """
DO $$
BEGIN
    IF to_regrole('lineage_app') IS NOT NULL THEN
        GRANT SELECT ON {table} TO lineage_app;
    END IF;
END $$
"""


def placed() -> bool:
    """Whether the schema is distributed on Citus already (its new tables must be too)."""
    bind = op.get_bind()
    citus = bind.exec_driver_sql("SELECT to_regclass('pg_dist_partition')").scalar()
    return citus is not None and bool(bind.exec_driver_sql(PLACED).scalar())


def confine_new_table(table: str) -> None:
    """A table of tenants' rows made by a migration, confined as the others are: row security
    by the session's tenant, read by the application role, and on a schema `lineage distribute`
    placed, distributed by tenant beside the others (which do not force row security there)."""
    is_placed = placed()
    op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
    tenant = EACH_ROW if is_placed else ONCE
    op.execute(
        f"CREATE POLICY {table}_tenant ON {table} "
        f"USING (tenant_id = {tenant}) WITH CHECK (tenant_id = {tenant})"
    )
    op.execute(GRANT_SELECT.format(table=table))
    if is_placed:
        op.execute(
            f"SELECT create_distributed_table('{table}', 'tenant_id', colocate_with => 'tenants')"
        )
    else:
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")


def each_tenant(body: str, tables: tuple[str, ...], *, update: bool) -> str:
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
