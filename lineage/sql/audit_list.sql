-- name: audit_list
-- The tenant's audit records since a time, oldest first, at most :limit of them after the
-- audit id :after_audit_id (the cursor of the page before; 0 for the first page).
--   psql -v tenant_id=default -v since=-infinity -v after_audit_id=0 -v limit=100 \
--        -f sql/audit_list.sql
SELECT a.audit_id, a.at, a.key_id, a.action, a.target, a.detail
FROM audit_log AS a
WHERE a.tenant_id = :'tenant_id' AND a.at >= :'since'::timestamptz
  AND a.audit_id > :after_audit_id
ORDER BY a.audit_id
LIMIT :limit
