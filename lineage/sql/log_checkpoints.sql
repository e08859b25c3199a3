-- name: log_checkpoints
-- The tenant's signed checkpoints larger than :after, oldest first (what a monitor follows).
--   psql -v tenant_id=default -v after=0 -v limit=100 -f sql/log_checkpoints.sql
SELECT tree_size, note
FROM log_checkpoints
WHERE tenant_id = :'tenant_id' AND tree_size > :after
ORDER BY tree_size
LIMIT :limit
