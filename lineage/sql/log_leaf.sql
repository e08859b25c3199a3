-- name: log_leaf
-- A record with its leaf index in the tenant's log (no row: unknown id; a null leaf_index:
-- not sequenced, and `queued` says whether it waits in the queue for a checkpoint, its event
-- past the log's events_logged, or has no leaf and no place in the queue, its leaf removed or
-- never logged; null record columns but created_at: the record is gone, its leaf stays in the
-- log, and created_at is the record's as its leaf kept it, null for leaves logged before
-- migration 0023).
--   psql -v tenant_id=default -v context_id=answer_1 -f sql/log_leaf.sql
SELECT l.leaf_index, p.tenant_id, p.context_id, p.parent_ids, p.kind, p.source_uri,
       p.content_hash, p.transform, p.transform_version, p.produced_by, p.index_snapshot,
       p.trace_id, p.created_at, p.attributes,
       l.leaf_index IS NULL AND q.queued IS NOT NULL AS queued
FROM provenance AS p
LEFT JOIN log_leaves AS l ON l.tenant_id = p.tenant_id AND l.context_id = p.context_id
-- A join, not EXISTS: Citus on PostgreSQL 15 refuses an outer join beside a pseudoconstant qual.
LEFT JOIN LATERAL (SELECT true AS queued FROM events AS e
                   WHERE e.tenant_id = :'tenant_id' AND e.context_id = p.context_id
                     AND e.position > coalesce((SELECT h.events_logged FROM log_heads AS h
                                                WHERE h.tenant_id = :'tenant_id'), 0)
                   LIMIT 1) AS q ON true
WHERE p.tenant_id = :'tenant_id' AND p.context_id = :'context_id'
UNION ALL
SELECT l.leaf_index, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       l.created_at, NULL, false
FROM log_leaves AS l
WHERE l.tenant_id = :'tenant_id' AND l.context_id = :'context_id'
  AND NOT EXISTS (SELECT 1 FROM provenance AS kept
                  WHERE kept.tenant_id = :'tenant_id' AND kept.context_id = :'context_id');
