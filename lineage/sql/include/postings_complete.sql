-- Whether every record of the tenant has its invalidation postings, for `WITH RECURSIVE
-- complete AS MATERIALIZED (...)`: then one range of invalidation_postings' b-tree answers an
-- invalidation; else (a record whose parent was not stored, or below one) the walk down the
-- edges does. The partial index on records without postings makes it one probe.
-- Takes :'tenant_id'.
    SELECT NOT EXISTS (SELECT 1 FROM provenance AS u
                       WHERE u.tenant_id = :'tenant_id' AND u.upstream_keys IS NULL) AS yes
