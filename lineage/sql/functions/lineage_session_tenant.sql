-- The tenant row security confines a session to. As the application role, it must be set
-- and vouched for (lineage.tenant_token); an owner's session (psql, the owner's functions)
-- names its tenant unvouched. plpgsql: Citus evaluates every function call of an INSERT on
-- the coordinator, each branch of a CASE included.
CREATE OR REPLACE FUNCTION public.lineage_session_tenant()
 RETURNS text
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    tenant text := current_setting('lineage.tenant_id', true);
BEGIN
    IF current_user = 'lineage_app' THEN
        IF coalesce(tenant, '') = '' THEN
            RAISE EXCEPTION 'lineage.tenant_id is not set: row security hides every record'
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'BEGIN; SET LOCAL lineage.tenant_id = ''<tenant>''; '
                             'SET LOCAL lineage.tenant_token = ''<token>''; then the query';
        END IF;
        IF NOT public.lineage_tenant_vouched(tenant, current_setting('lineage.tenant_token', true))
        THEN
            RAISE EXCEPTION 'lineage.tenant_id is not vouched for by lineage.tenant_token'
                USING ERRCODE = 'insufficient_privilege',
                      HINT = 'the service sets both; `lineage tenant token <tenant>` prints '
                             'the token for psql';
        END IF;
    END IF;
    RETURN tenant;
END
$function$;
