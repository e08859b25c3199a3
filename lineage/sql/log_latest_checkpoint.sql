-- name: log_latest_checkpoint
-- The tenant's newest signed checkpoint.
--   psql -v tenant_id=default -f sql/log_latest_checkpoint.sql
SELECT tree_size, root_hash, signed_at, note
FROM log_checkpoints
WHERE tenant_id = :'tenant_id'
ORDER BY tree_size DESC
LIMIT 1;
