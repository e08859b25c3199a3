-- name: key_lookup
-- A key's tenant, scope, secret hash and whether it is revoked, before any tenant is known
-- (through lineage_key, which the application role may call but whose table it cannot read).
--   psql -v key_id=k1 -f sql/key_lookup.sql
SELECT k.tenant_id, k.scope, k.key_hash, k.revoked
FROM lineage_key(:'key_id') AS k
