-- name: key_list
-- The tenant's keys (never their hashes), newest first.
--   psql -v tenant_id=default -f sql/key_list.sql
SELECT k.key_id, k.scope, k.label, k.created_at, k.revoked_at
FROM api_keys AS k
WHERE k.tenant_id = :'tenant_id'
ORDER BY k.created_at DESC, k.key_id
