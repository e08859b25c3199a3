-- name: log_append_leaves
-- Give records their leaf indexes (parallel arrays), each with its record's created_at, kept
-- for the record's leaf should retention drop it (sql/log_leaf.sql). The primary key and the
-- unique (tenant_id, context_id) refuse a gap-filling duplicate outright.
-- Counted through RETURNING: Citus runs an INSERT ... SELECT without one as a COPY,
-- which row-level security refuses.
WITH inserted AS (
    INSERT INTO log_leaves (tenant_id, leaf_index, context_id, created_at)
    SELECT :'tenant_id', l.leaf_index, l.context_id, l.created_at
    FROM unnest(:'leaf_indexes'::bigint[], :'context_ids'::text[], :'created_ats'::timestamptz[])
         AS l (leaf_index, context_id, created_at)
    RETURNING 1
)
SELECT count(*) AS inserted FROM inserted;
