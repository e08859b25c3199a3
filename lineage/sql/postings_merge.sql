-- name: postings_merge
-- Merge the small postings rows of the keys the tenant's next :records records are posted
-- under (lineage_postings_merge): how many records it passed, the rows it merged and wrote.
--   psql -v tenant_id=default -v records=20000 -f sql/postings_merge.sql
SELECT * FROM lineage_postings_merge(:'tenant_id', :records);
