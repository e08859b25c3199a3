-- name: append_records
-- Appends a batch of stamped, signed records for the tenant, with each record's root sources
-- and invalidation keys, through the owner's function (sql/functions/lineage_append.sql):
-- one call, one round trip, on Citus one router call on the tenant's worker. Returns the ids
-- inserted (ids already stored are left alone), the tenant's last stream position given, and
-- any id a concurrent append stored in another month partition at the same moment.
SELECT a.inserted, a.last_position, a.stored_twice
FROM lineage_append(
    :'tenant_id', :'tenant_token',
    :'context_ids'::text[], :'parent_id_lists'::text[], :'kinds'::text[],
    :'source_uris'::text[], :'content_hashes'::text[], :'transforms'::text[],
    :'transform_versions'::text[], :'version_keys'::text[], :'produced_bys'::text[],
    :'index_snapshots'::text[], :'trace_ids'::text[], :'created_ats'::timestamptz[],
    :'attribute_docs'::text[], :'key_ids'::text[], :'signatures'::bytea[],
    :'root_source_lists'::text[], :'root_depth_lists'::text[],
    :'upstream_key_lists'::text[], :'upstream_depth_lists'::text[]) AS a;
