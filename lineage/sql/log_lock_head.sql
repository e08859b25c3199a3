-- name: log_lock_head
-- Lock the tenant's log head (creating it at size 0) and return it. The row lock serialises
-- sequencing and signing per tenant: whoever holds it may append leaves and sign.
--   psql -v tenant_id=default -f sql/log_lock_head.sql
INSERT INTO log_heads AS h (tenant_id) VALUES (:'tenant_id')
ON CONFLICT (tenant_id) DO UPDATE SET tenant_id = h.tenant_id
RETURNING h.tree_size, h.root_hash, h.updated_at;
