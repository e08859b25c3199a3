-- name: events_after
-- The live event stream (GET /v1/events): a tenant's records appended after a stream position,
-- in stream order, one page at a time. A position is the (xid, event_id) of the last row sent
-- (0 and 0 for everything). Only rows of transactions older than every running one (below the
-- snapshot's xmin) are returned, so a transaction that commits late never lands behind a
-- position already sent. The first column, horizon, is that xmin: after a page shorter than
-- page_size every row below it has been seen, so (horizon, 0) is a safe next position. Always
-- at least one row; with no records the record columns are null. Filters take 'any'.
--   psql -v tenant_id=default -v after_xid=0 -v after_event_id=0 -v trace_id=any \
--        -v session_id=any -v page_size=100 -f sql/events_after.sql
SELECT horizon.xmin AS horizon, page.xid, page.event_id, page.context_id, page.kind,
       page.parent_ids, page.source_uri, page.content_hash, page.transform,
       page.transform_version, page.produced_by, page.index_snapshot, page.trace_id,
       page.created_at, page.attributes
FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) AS horizon
LEFT JOIN LATERAL (
    SELECT e.xid, e.event_id, r.context_id, r.kind, r.parent_ids, r.source_uri,
           r.content_hash, r.transform, r.transform_version, r.produced_by, r.index_snapshot,
           r.trace_id, r.created_at, r.attributes
    FROM events AS e
    JOIN provenance AS r ON r.tenant_id = e.tenant_id AND r.context_id = e.context_id
    WHERE e.tenant_id = :'tenant_id'
      AND (e.xid, e.event_id) > (:'after_xid'::xid8, :'after_event_id'::bigint)
      AND e.xid < horizon.xmin
      AND (:'trace_id' = 'any' OR r.trace_id = :'trace_id')
      AND (:'session_id' = 'any' OR r.attributes ->> 'session_id' = :'session_id')
    ORDER BY e.xid, e.event_id
    LIMIT :page_size
) AS page ON true
ORDER BY page.xid, page.event_id;
