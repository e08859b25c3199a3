-- name: log_append_leaves
-- Give records their leaf indexes (parallel arrays). The primary key and the unique
-- (tenant_id, context_id) refuse a gap-filling duplicate outright.
INSERT INTO log_leaves (tenant_id, leaf_index, context_id)
SELECT :'tenant_id', l.leaf_index, l.context_id
FROM unnest(:'leaf_indexes'::bigint[], :'context_ids'::text[]) AS l (leaf_index, context_id);
