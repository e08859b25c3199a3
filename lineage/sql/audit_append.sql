-- name: audit_append
-- One audit record: who (key id) did what (action) to what (target), now. Append-only.
--   psql -v tenant_id=default -v key_id=k1 -v action=walk -v target=answer_1 -v detail='{}' -f sql/audit_append.sql
INSERT INTO audit_log (tenant_id, key_id, action, target, detail)
VALUES (:'tenant_id', nullif(:'key_id', ''), :'action', nullif(:'target', ''), :'detail'::jsonb)
