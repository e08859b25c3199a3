-- name: key_create
-- Store a new key for the transaction's (vouched) tenant: its id, scope and the SHA-256 of its
-- secret (never the secret), through lineage_key_create: the application role writes no key
-- row itself.
--   psql -v key_id=k1 -v scope=read -v key_hash='\x00' -v label=ci -f sql/key_create.sql
SELECT k.key_id, k.tenant_id, k.scope, k.label, k.created_at
FROM lineage_key_create(:'key_id', :'scope', :'key_hash'::bytea, :'label') AS k
