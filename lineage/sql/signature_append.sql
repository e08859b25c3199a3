-- name: signature_append
-- Signs records just appended (parallel arrays, one element per record): the HMAC-SHA256 of
-- each record's canonical form and the id of the key that made it, beside the record (in the
-- partition of the record's created_at).
-- Append-only: a record is signed once, in the transaction that inserts it.
-- Counted through RETURNING: Citus runs an INSERT ... SELECT without one as a COPY,
-- which row-level security refuses.
WITH inserted AS (
    INSERT INTO record_signatures (tenant_id, context_id, key_id, signature, created_at)
    SELECT :'tenant_id', s.context_id, s.key_id, s.signature, s.created_at
    FROM unnest(:'context_ids'::text[], :'key_ids'::text[], :'signatures'::bytea[],
                :'created_ats'::timestamptz[])
         AS s (context_id, key_id, signature, created_at)
    RETURNING 1
)
SELECT count(*) AS inserted FROM inserted;
