-- name: bundle_retire_text_keys
-- The imported tenant's keys other than its settings' one (bundle_import_settings set it), so
-- the application role cannot set a former key back. A statement of its own, after the
-- settings' update: Citus runs a statement's modifying CTEs one by one on the shard, where a
-- DELETE before that UPDATE would still be referenced by tenant_settings (its foreign key).
-- Owner only.
DELETE FROM tenant_text_keys
WHERE tenant_id = :'tenant_id' AND text_hash_key <> :'text_hash_key';
