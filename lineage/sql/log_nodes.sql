-- name: log_nodes
-- Stored subtree hashes by (level, node_index) (parallel arrays): what one proof reads. One
-- primary-key probe per node asked for, whatever the size of the log.
--   psql -v tenant_id=default -v levels='{0,1}' -v node_indexes='{3,0}' -f sql/log_nodes.sql
SELECT n.level, n.node_index, n.hash
FROM unnest(:'levels'::smallint[], :'node_indexes'::bigint[]) AS want (level, node_index)
CROSS JOIN LATERAL (
    SELECT s.level, s.node_index, s.hash
    FROM log_nodes AS s
    WHERE s.tenant_id = :'tenant_id' AND s.level = want.level AND s.node_index = want.node_index
    OFFSET 0  -- keep it a probe per node: never a scan of the tenant's tree
) AS n;
