-- name: log_nodes
-- Kept subtree hashes by (level, node_index) (parallel arrays): what one proof reads. A leaf's
-- (level 0) is on its log_leaves row, every fourth level's above in log_nodes
-- (lineage.verifiable_log.storage.KEPT_EVERY). One primary-key probe per node asked for,
-- whatever the size of the log.
--   psql -v tenant_id=default -v levels='{0,4}' -v node_indexes='{3,0}' -f sql/log_nodes.sql
SELECT n.level, n.node_index, n.hash
FROM unnest(:'levels'::smallint[], :'node_indexes'::bigint[]) AS want (level, node_index)
CROSS JOIN LATERAL (
    SELECT want.level, l.leaf_index AS node_index, l.hash
    FROM log_leaves AS l
    WHERE want.level = 0 AND l.tenant_id = :'tenant_id' AND l.leaf_index = want.node_index
      AND l.hash IS NOT NULL
  UNION ALL
    SELECT s.level, s.node_index, s.hash
    FROM log_nodes AS s
    WHERE want.level > 0 AND s.tenant_id = :'tenant_id' AND s.level = want.level
      AND s.node_index = want.node_index
    OFFSET 0  -- keep it a probe per node: never a scan of the tenant's tree
) AS n;
