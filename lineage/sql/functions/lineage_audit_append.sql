-- One audit record, as sql/audit_append.sql writes it (its statement, filled in by
-- `python -m lineage.db.include_sql`): for the reads that answer in one call with the
-- request's audit row (lineage_walk_back). Only the owner's functions call it.
CREATE OR REPLACE FUNCTION public.lineage_audit_append(p_tenant_id text, p_at timestamp with time zone, p_key_id text, p_action text, p_target text, p_detail jsonb)
 RETURNS bigint
 LANGUAGE sql
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
-- statement: audit_append
WITH counter AS (
    INSERT INTO public.tenant_counters AS c (tenant_id, counter, last_value)
    VALUES ($1, 'audit', 1)
    ON CONFLICT (tenant_id, counter) DO UPDATE SET last_value = c.last_value + 1
    RETURNING c.last_value
)
INSERT INTO public.audit_log (tenant_id, audit_id, at, key_id, action, target, detail)
SELECT $1, counter.last_value, coalesce($2::timestamptz, clock_timestamp()),
       nullif($3, ''), $4, nullif($5, ''), $6::jsonb
FROM counter
RETURNING audit_id
-- end statement: audit_append
$function$;
REVOKE ALL ON FUNCTION public.lineage_audit_append(p_tenant_id text, p_at timestamp with time zone, p_key_id text, p_action text, p_target text, p_detail jsonb) FROM PUBLIC;
