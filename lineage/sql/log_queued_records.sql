-- name: log_queued_records
-- The tenant's oldest queued records (its events past the log's events_logged), in stream
-- order, with the fields of their canonical form: the next leaves of its log. Reads only the
-- batch: each record by its primary key; an event whose record is no longer stored is passed.
--   psql -v tenant_id=default -v batch_size=1000 -f sql/log_queued_records.sql
SELECT p.tenant_id, p.context_id, p.parent_ids, p.kind, p.source_uri,
       p.content_hash, p.transform, p.transform_version, p.produced_by, p.index_snapshot,
       p.trace_id, p.created_at, p.attributes
FROM events AS e
CROSS JOIN LATERAL (
    SELECT r.*
    FROM provenance AS r
    WHERE r.tenant_id = :'tenant_id' AND r.context_id = e.context_id
    OFFSET 0  -- a primary-key probe per queued record, never a scan of the tenant's records
) AS p
WHERE e.tenant_id = :'tenant_id'
  AND e.position > coalesce((SELECT h.events_logged FROM log_heads AS h
                             WHERE h.tenant_id = :'tenant_id'), 0)
ORDER BY e.position
LIMIT :batch_size;
