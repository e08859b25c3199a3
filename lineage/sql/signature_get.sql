-- name: signature_get
-- The stored signatures of these records (an array literal such as '{ctx_a,ctx_b}') in one
-- tenant: key id and HMAC-SHA256. A record without a row here was never signed.
SELECT context_id, key_id, signature
FROM record_signatures
WHERE tenant_id = :'tenant_id' AND context_id = ANY (:'context_ids'::text[]);
