-- The application role: it appends and reads (grants come with each revision) and owns nothing.
-- It may log in: Citus opens its connections to the workers as the role a query runs as (give
-- it a password, or a pg_hba rule, where it should connect). Idempotent; run by `lineage
-- migrate` before the alembic revisions.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        CREATE ROLE lineage_app LOGIN;
    ELSIF NOT (SELECT rolcanlogin FROM pg_roles WHERE rolname = 'lineage_app') THEN
        ALTER ROLE lineage_app LOGIN;
    END IF;
    IF NOT pg_has_role(current_user, 'lineage_app', 'MEMBER') THEN
        EXECUTE format('GRANT lineage_app TO %I', current_user);
    END IF;
END
$$;
