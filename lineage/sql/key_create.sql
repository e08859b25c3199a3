-- name: key_create
-- Store a new key: its id, tenant, scope and the SHA-256 of its secret (never the secret).
--   psql -v tenant_id=default -v key_id=k1 -v scope=read -v key_hash='\x00' -v label=ci -f sql/key_create.sql
INSERT INTO api_keys (key_id, tenant_id, scope, key_hash, label)
VALUES (:'key_id', :'tenant_id', :'scope', :'key_hash'::bytea, nullif(:'label', ''))
RETURNING key_id, tenant_id, scope, label, created_at
