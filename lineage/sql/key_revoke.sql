-- name: key_revoke
-- Revoke one of the tenant's keys; a revoked key stays revoked (the first time is kept).
--   psql -v tenant_id=default -v key_id=k1 -f sql/key_revoke.sql
UPDATE api_keys
SET revoked_at = coalesce(revoked_at, now())
WHERE tenant_id = :'tenant_id' AND key_id = :'key_id'
RETURNING key_id, revoked_at
