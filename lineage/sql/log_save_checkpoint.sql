-- name: log_save_checkpoint
-- Keep a signed checkpoint (one per tree size).
INSERT INTO log_checkpoints (tenant_id, tree_size, root_hash, signed_at, note)
VALUES (:'tenant_id', :tree_size, :'root_hash', :'signed_at', :'note');
