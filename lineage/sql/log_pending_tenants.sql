-- name: log_pending_tenants
-- Tenants with records waiting to join their log.
SELECT tenant_id FROM log_pending_tenants() AS t (tenant_id) ORDER BY tenant_id;
