-- name: log_lock_head
-- Lock the tenant's log head (creating it at size 0) and return it, through the owner's
-- lineage_log_lock. The row lock serialises sequencing and signing per tenant: whoever holds it
-- may advance the log (sql/log_advance.sql) and sign.
--   psql -v tenant_id=default -v tenant_token=<token> -f sql/log_lock_head.sql
SELECT h.tree_size, h.root_hash, h.updated_at
FROM lineage_log_lock(:'tenant_id', :'tenant_token') AS h;
