-- name: append_records
-- Appends a batch of stamped, signed records for the tenant, with the batch's invalidation keys,
-- each record's root sources and upstream keys among them, and the postings that list the
-- records by key, through the owner's function (sql/functions/lineage_append.sql):
-- one call, one round trip, on Citus one router call on the tenant's worker. Returns the ids
-- inserted (ids already stored are left alone), the tenant's last stream position given, and
-- any id a concurrent append stored in another month partition at the same moment.
SELECT a.inserted, a.last_position, a.stored_twice
FROM lineage_append(
    :'tenant_id', :'tenant_token',
    :'context_ids'::text[], :'is_uuids'::boolean[], :'parent_id_lists'::text[], :'kinds'::text[],
    :'source_uris'::text[], :'content_hashes'::text[], :'transforms'::text[],
    :'transform_versions'::text[], :'version_keys'::text[], :'produced_bys'::text[],
    :'index_snapshots'::text[], :'trace_ids'::text[], :'created_ats'::timestamptz[],
    :'attribute_docs'::text[], :'key_ids'::text[], :'signatures'::bytea[], :'keys'::text[],
    :'upstream_key_lists'::text[], :'upstream_depth_lists'::text[],
    :'root_source_lists'::text[], :'root_depth_lists'::text[],
    :'posting_keys'::integer[], :'posting_kinds'::text[], :'posting_depths'::integer[],
    :'posting_created_ats'::timestamptz[], :'posting_uuid_lists'::text[],
    :'posting_id_lists'::text[]) AS a;
