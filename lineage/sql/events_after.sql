-- name: events_after
-- The live event stream (GET /v1/events): a tenant's records appended after a stream position,
-- in stream order, one page at a time. A position is the per-tenant number of the last record
-- sent (0 for everything). Positions commit in their order (lineage_append), so every
-- position up to the newest visible one is visible. The first column, newest, is that newest
-- position: after a page shorter than page_size every row up to it has been seen, the
-- matching and the filtered-out alike, so it is the next position. Always at least one row;
-- with no records after the position the record columns are null. Filters take 'any'.
--   psql -v tenant_id=default -v after=0 -v trace_id=any -v session_id=any -v page_size=100 \
--        -f sql/events_after.sql
SELECT newest.position AS newest, page.position, page.context_id, page.kind, page.parent_ids,
       page.source_uri, page.content_hash, page.transform, page.transform_version,
       page.produced_by, page.index_snapshot, page.trace_id, page.created_at, page.attributes
FROM (
    SELECT coalesce(max(position), 0) AS position FROM events WHERE tenant_id = :'tenant_id'
) AS newest
LEFT JOIN LATERAL (
    SELECT e.position, r.context_id, r.kind, r.parent_ids, r.source_uri, r.content_hash,
           r.transform, r.transform_version, r.produced_by, r.index_snapshot, r.trace_id,
           r.created_at, r.attributes
    FROM events AS e
    JOIN provenance AS r ON r.tenant_id = e.tenant_id AND r.context_id = e.context_id
    WHERE e.tenant_id = :'tenant_id'
      AND e.position > :'after'::bigint
      AND (:'trace_id' = 'any' OR r.trace_id = :'trace_id')
      AND (:'session_id' = 'any' OR r.attributes ->> 'session_id' = :'session_id')
    ORDER BY e.position
    LIMIT :page_size
) AS page ON true
ORDER BY page.position;
