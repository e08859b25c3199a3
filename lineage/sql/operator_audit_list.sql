-- name: operator_audit_list
-- What the operator did to whole tenants (deletions and their receipts), oldest first.
-- Owner only.
--   psql -v since=-infinity -v limit=100 -f sql/operator_audit_list.sql
SELECT audit_id, at, operator, action, target, detail
FROM operator_audit
WHERE at >= :'since'::timestamptz
ORDER BY audit_id
LIMIT :limit;
