-- name: signature_get
-- The stored signatures of these records (an array literal such as '{ctx_a,ctx_b}') in one
-- tenant: key id and HMAC-SHA256, kept on the record (migration 0036). A record without one
-- (inserted around the append) was never signed and is not listed.
SELECT context_id, key_id, signature
FROM provenance
WHERE tenant_id = :'tenant_id' AND context_id = ANY (:'context_ids'::text[])
  AND signature IS NOT NULL;
