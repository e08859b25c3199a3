-- name: log_head
-- The tenant's tree as sequenced so far (no row: nothing sequenced yet).
--   psql -v tenant_id=default -f sql/log_head.sql
SELECT tree_size, root_hash, updated_at
FROM log_heads
WHERE tenant_id = :'tenant_id';
