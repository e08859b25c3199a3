-- A new key, for the vouched tenant only (a tenant that exists); the secret's hash, never it.
CREATE OR REPLACE FUNCTION public.lineage_key_create(p_key_id text, p_scope text, p_key_hash bytea, p_label text)
 RETURNS TABLE(key_id text, tenant_id text, scope text, label text, created_at timestamp with time zone)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
DECLARE
    tenant text := public.lineage_vouched_tenant();
BEGIN
    IF NOT EXISTS (SELECT 1 FROM public.tenants AS t
                   WHERE t.tenant_id OPERATOR(pg_catalog.=) tenant) THEN
        RAISE EXCEPTION 'no tenant %', tenant USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN QUERY
    INSERT INTO public.api_keys AS k (key_id, tenant_id, scope, key_hash, label)
    VALUES (p_key_id, tenant, p_scope, p_key_hash, nullif(p_label, ''))
    RETURNING k.key_id, k.tenant_id, k.scope, k.label, k.created_at;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_key_create(p_key_id text, p_scope text, p_key_hash bytea, p_label text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.lineage_key_create(p_key_id text, p_scope text, p_key_hash bytea, p_label text) TO lineage_app;
