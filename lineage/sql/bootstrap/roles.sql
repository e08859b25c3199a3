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
    -- The owner may SET ROLE lineage_app (where the role cannot log in). Since PostgreSQL 16 a
    -- CREATEROLE creator is a member without that option until granted it; before, any member.
    IF NOT pg_has_role(current_user, 'lineage_app',
                       CASE WHEN current_setting('server_version_num')::int >= 160000
                            THEN 'SET' ELSE 'MEMBER' END) THEN
        EXECUTE format('GRANT lineage_app TO %I', current_user);
    END IF;
END
$$;
