-- name: key_revoke
-- Revoke one of the transaction's (vouched) tenant's keys, through lineage_key_revoke (which
-- notifies every service's key cache); a revoked key stays revoked (the first time is kept).
-- No row: no such key for this tenant.
--   psql -v key_id=k1 -f sql/key_revoke.sql
SELECT k.key_id, k.revoked_at FROM lineage_key_revoke(:'key_id') AS k
