-- Is the record's class of text captured for its tenant? The same mapping as
-- lineage.services.privacy.capture_switch: queries, answers, claims; else source text.
CREATE OR REPLACE FUNCTION public.lineage_captures(p_tenant_id text, p_context_id text)
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
 SET "citus.allow_nested_distributed_execution" TO 'on'
AS $function$
BEGIN
    RETURN coalesce((
        SELECT CASE
                   WHEN p.kind OPERATOR(pg_catalog.=) 'query' THEN s.capture_query_text
                   WHEN p.kind IN ('claim', 'answer') THEN s.capture_answer_text
                   ELSE s.capture_source_text
               END
        FROM public.provenance AS p
        JOIN public.tenant_settings AS s ON s.tenant_id OPERATOR(pg_catalog.=) p.tenant_id
        WHERE p.tenant_id OPERATOR(pg_catalog.=) p_tenant_id
          AND p.context_id OPERATOR(pg_catalog.=) p_context_id
    ), false);
END
$function$;
