-- name: key_names
-- The invalidation keys these numbers stand for in the tenant's records' root_sources and
-- upstream_keys ('source:' and a source_uri, 'transform_version:…', 'index_snapshot:…').
--   psql -v tenant_id=default -v key_nos='{1,2}' -f sql/key_names.sql
SELECT k.key_no, k.key
FROM invalidation_keys AS k
WHERE k.tenant_id = :'tenant_id' AND k.key_no = ANY (:'key_nos'::integer[]);
