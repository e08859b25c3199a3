-- name: key_names
-- The invalidation keys these numbers stand for in the tenant's records' root_sources and
-- upstream_keys ('source:' and a source_uri, 'transform_version:…', 'index_snapshot:…').
--   psql -v tenant_id=default -v key_nos='{1,2}' -f sql/key_names.sql
-- A probe per number (OFFSET 0 keeps the subquery apart), whatever the statistics say: as a
-- filter, a session's plan made while the tenant had few keys read all of them each append.
SELECT k.key_no, k.key
FROM unnest(:'key_nos'::integer[]) AS wanted (key_no)
CROSS JOIN LATERAL (
    SELECT k.key_no, k.key FROM invalidation_keys AS k
    WHERE k.tenant_id = :'tenant_id' AND k.key_no = wanted.key_no
    OFFSET 0
) AS k;
