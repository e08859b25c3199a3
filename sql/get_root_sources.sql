-- name: get_root_sources
-- The root sources of these records: the source_uri of each root a record derives from, with
-- its minimal depth below a root of that source, from the derived side table root_sources.
--   psql -v tenant_id=default -v context_ids='{answer_1}' -f sql/get_root_sources.sql
SELECT context_id, source_uri, depth
FROM root_sources
WHERE tenant_id = :'tenant_id' AND context_id = ANY (:'context_ids'::text[]);
