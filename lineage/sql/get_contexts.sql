-- name: get_contexts
-- The records with these ids (an array literal such as '{ctx_a,ctx_b}') in one tenant. The
-- table is named with its schema: lineage_get_contexts runs this statement as the owner with
-- only pg_catalog on its path.
SELECT tenant_id, context_id, parent_ids, kind, source_uri, content_hash, transform,
       transform_version, produced_by, index_snapshot, trace_id, created_at, attributes
FROM public.provenance
WHERE tenant_id = :'tenant_id' AND context_id = ANY (:'context_ids'::text[]);
