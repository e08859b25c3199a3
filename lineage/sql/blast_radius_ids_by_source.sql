-- name: blast_radius_ids_by_source
-- The ids in the blast radius of a document, with kind and depth, without reading a record:
-- the listing a deletion or cache-invalidation job needs, and counts by kind. The same rows,
-- in the same order, as sql/blast_radius_by_source.sql.
--   psql -v tenant_id=default -v source_uri=s3://policies/contractors.md -v kind=answer \
--        -v max_depth=20 -f sql/blast_radius_ids_by_source.sql
SELECT d.context_id, d.kind, d.depth, d.truncated
FROM lineage_source_radius(:'tenant_id', :'source_uri', :'kind', :max_depth) AS d
ORDER BY d.depth, d.context_id;
