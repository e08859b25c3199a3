-- The application role: it appends and reads (grants come with each revision) and owns nothing.
-- Idempotent; run by `lineage migrate` before the alembic revisions.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        CREATE ROLE lineage_app NOLOGIN;
    END IF;
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE format('GRANT lineage_app TO %I', current_user);
    END IF;
END
$$;
