-- name: postings_pending_tenants
-- Tenants with records whose postings the background round has not merged yet.
SELECT tenant_id FROM lineage_postings_pending() AS t (tenant_id) ORDER BY tenant_id;
