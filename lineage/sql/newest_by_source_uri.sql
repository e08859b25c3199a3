-- name: newest_by_source_uri
-- For each source URI (an array literal), the newest record of the tenant with that source_uri,
-- leaving out verdicts and tombstones: the document a retrieved text names only by where it came
-- from. No row for a source the tenant has never recorded.
--   psql -v tenant_id=default -v source_uris='{s3://docs/refunds.md}' -f sql/newest_by_source_uri.sql
SELECT wanted.source_uri, newest.context_id
FROM unnest(:'source_uris'::text[]) AS wanted (source_uri)
CROSS JOIN LATERAL (
    SELECT p.context_id
    FROM provenance AS p
    WHERE p.tenant_id = :'tenant_id' AND p.source_uri = wanted.source_uri
      AND p.kind NOT IN ('verdict', 'tombstone')
    ORDER BY p.created_at DESC, p.context_id DESC
    LIMIT 1
) AS newest;
