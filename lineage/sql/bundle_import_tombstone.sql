-- name: bundle_import_tombstone
-- A forget tombstone that retention had dropped from the exported tenant (which kept it past
-- the period in forget_tombstones), written by an import where retention keeps tombstones: under
-- the importing tenant, signed again by this service. Owner only.
INSERT INTO forget_tombstones (tenant_id, context_id, parent_ids, kind, source_uri, content_hash,
                               transform, transform_version, produced_by, index_snapshot,
                               trace_id, created_at, attributes, key_id, signature)
VALUES (:'tenant_id', :'context_id', :'parent_ids', :'kind', :'source_uri', :'content_hash',
        :'transform', :'transform_version', :'produced_by', :'index_snapshot', :'trace_id',
        :'created_at', :'attributes', :'key_id', :'signature');
