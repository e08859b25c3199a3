-- name: log_advance_head
-- Move the tenant's head to the new tree (the caller holds its lock from log_lock_head).
UPDATE log_heads
SET tree_size = :tree_size, root_hash = :'root_hash', updated_at = now()
WHERE tenant_id = :'tenant_id';
