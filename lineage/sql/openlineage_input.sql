-- name: openlineage_input
-- The record an OpenLineage run's input dataset (:source_uri) resolves to. The run's records
-- carry its id as :trace_id. First the record this run already read (a parent, with that
-- source_uri, of a record the run wrote), so a replay or a later event of the run links the
-- same one; else the newest record with that source_uri that the run did not write. No row:
-- the dataset is new to this tenant.
--   psql -v tenant_id=default -v trace_id=0190f8a4c3e27d3a9f1b2c4d5e6f7a8b \
--        -v source_uri=s3://warehouse/raw/orders -f sql/openlineage_input.sql
SELECT found.context_id
FROM ((SELECT 0 AS preference, parent.context_id
       FROM provenance AS written
       CROSS JOIN LATERAL unnest(written.parent_ids) AS consumed(context_id)
       JOIN provenance AS parent
         ON parent.tenant_id = :'tenant_id' AND parent.context_id = consumed.context_id
       WHERE written.tenant_id = :'tenant_id' AND written.trace_id = :'trace_id'
         AND parent.source_uri = :'source_uri'
       ORDER BY written.created_at, written.context_id
       LIMIT 1)
      UNION ALL
      (SELECT 1, newest.context_id
       FROM provenance AS newest
       WHERE newest.tenant_id = :'tenant_id' AND newest.source_uri = :'source_uri'
         AND newest.trace_id IS DISTINCT FROM :'trace_id'
         AND newest.kind NOT IN ('verdict', 'tombstone')
       ORDER BY newest.created_at DESC, newest.context_id DESC
       LIMIT 1)) AS found
ORDER BY found.preference
LIMIT 1;
