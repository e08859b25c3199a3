-- name: key_revoke
-- Revoke one of the tenant's keys; a revoked key stays revoked (the first time is kept).
--   psql -v tenant_id=default -v key_id=k1 -f sql/key_revoke.sql
WITH revoked AS (
    UPDATE api_keys
    SET revoked_at = now()
    WHERE tenant_id = :'tenant_id' AND key_id = :'key_id' AND revoked_at IS NULL
    RETURNING key_id, revoked_at
)
SELECT key_id, revoked_at FROM revoked
UNION ALL
SELECT k.key_id, k.revoked_at
FROM api_keys AS k
WHERE k.tenant_id = :'tenant_id' AND k.key_id = :'key_id' AND k.revoked_at IS NOT NULL

