-- name: newest_by_content_hash
-- For each content hash (an array literal), the newest record of the tenant with exactly that
-- hash, leaving out verdicts and tombstones: what a retrieved text that carries no id was cut
-- from. No row for a hash the tenant has never recorded.
--   psql -v tenant_id=default -v content_hashes='{sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08}' \
--        -f sql/newest_by_content_hash.sql
SELECT wanted.content_hash, newest.context_id
FROM unnest(:'content_hashes'::text[]) AS wanted (content_hash)
CROSS JOIN LATERAL (
    SELECT p.context_id
    FROM provenance AS p
    WHERE p.tenant_id = :'tenant_id' AND p.content_hash = wanted.content_hash
      AND p.kind NOT IN ('verdict', 'tombstone')
    ORDER BY p.created_at DESC, p.context_id DESC
    LIMIT 1
) AS newest;
