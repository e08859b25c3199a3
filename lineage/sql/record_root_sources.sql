-- name: record_root_sources
-- Notes the root sources of newly appended records, one row per record and source, given as
-- parallel arrays (created_at: the record's, the partition key). Derived from parent_ids, never
-- part of a record. Only records this transaction inserted get rows, so none can exist yet: no
-- ON CONFLICT, which would cost every row an index probe and a WAL record more.
-- Counted through RETURNING: Citus runs an INSERT ... SELECT without one as a COPY,
-- which row-level security refuses.
WITH inserted AS (
    INSERT INTO root_sources (tenant_id, source_uri, kind, context_id, depth, created_at)
    SELECT :'tenant_id', r.source_uri, r.kind, r.context_id, r.depth, r.created_at
    FROM unnest(:'context_ids'::text[], :'kinds'::text[], :'source_uris'::text[],
                :'depths'::int[], :'created_ats'::timestamptz[])
         AS r(context_id, kind, source_uri, depth, created_at)
    RETURNING 1
)
SELECT count(*) AS inserted FROM inserted;
