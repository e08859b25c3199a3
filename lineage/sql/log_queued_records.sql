-- name: log_queued_records
-- The tenant's oldest queued records, in queue order, with the fields of their canonical form:
-- the next leaves of its log. Reads only the batch: each record by its primary key. (Queue ids
-- order the queue and are no one's business: on Citus each worker numbers its own.)
--   psql -v tenant_id=default -v batch_size=1000 -f sql/log_queued_records.sql
WITH batch AS MATERIALIZED (
    SELECT q.queued_id, q.context_id
    FROM log_queue AS q
    WHERE q.tenant_id = :'tenant_id'
    ORDER BY q.queued_id
    LIMIT :batch_size
)
SELECT p.tenant_id, p.context_id, p.parent_ids, p.kind, p.source_uri,
       p.content_hash, p.transform, p.transform_version, p.produced_by, p.index_snapshot,
       p.trace_id, p.created_at, p.attributes
FROM batch AS b
CROSS JOIN LATERAL (
    SELECT r.*
    FROM provenance AS r
    WHERE r.tenant_id = :'tenant_id' AND r.context_id = b.context_id
    OFFSET 0  -- a primary-key probe per queued record, never a scan of the tenant's records
) AS p
ORDER BY b.queued_id;
