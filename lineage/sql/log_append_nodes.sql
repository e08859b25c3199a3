-- name: log_append_nodes
-- Store newly completed subtree hashes (parallel arrays; leaves are level 0).
-- Counted through RETURNING: Citus runs an INSERT ... SELECT without one as a COPY,
-- which row-level security refuses.
WITH inserted AS (
    INSERT INTO log_nodes (tenant_id, level, node_index, hash)
    SELECT :'tenant_id', n.level, n.node_index, n.hash
    FROM unnest(:'levels'::smallint[], :'node_indexes'::bigint[], :'hashes'::bytea[])
         AS n (level, node_index, hash)
    RETURNING 1
)
SELECT count(*) AS inserted FROM inserted;
