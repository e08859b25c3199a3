-- name: log_append_leaves
-- Give records their leaf indexes (parallel arrays). The primary key and the unique
-- (tenant_id, context_id) refuse a gap-filling duplicate outright.
-- Counted through RETURNING: Citus runs an INSERT ... SELECT without one as a COPY,
-- which row-level security refuses.
WITH inserted AS (
    INSERT INTO log_leaves (tenant_id, leaf_index, context_id)
    SELECT :'tenant_id', l.leaf_index, l.context_id
    FROM unnest(:'leaf_indexes'::bigint[], :'context_ids'::text[]) AS l (leaf_index, context_id)
    RETURNING 1
)
SELECT count(*) AS inserted FROM inserted;
