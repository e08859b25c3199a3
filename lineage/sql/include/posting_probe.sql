-- The tenant's records whose invalidation postings hold the key in `wanted (key)`, of :'kind'
-- (a kind, 'any' for all but verdict and tombstone, or 'all'), for `FROM provenance AS p`,
-- when `complete` says every record of the tenant has postings. The GIN index's terms are the
-- postings with the record's tenant and kind (migration 0033), so a kind asked for is part of
-- the probe: only the tenant's records of that kind are read from the table, not every record
-- below the key. Takes :'tenant_id', :'kind'.
    WHERE (SELECT yes FROM complete)
      AND p.tenant_id = :'tenant_id'
      AND (p.upstream_keys || ARRAY['tenant:' || p.tenant_id, 'kind:' || p.kind])
          @> (ARRAY[(SELECT key FROM wanted), 'tenant:' || :'tenant_id']
              || CASE WHEN :'kind' IN ('any', 'all') THEN '{}' ELSE ARRAY['kind:' || :'kind'] END)
      AND (p.kind = :'kind' OR :'kind' = 'all'
           OR (:'kind' = 'any' AND p.kind NOT IN ('verdict', 'tombstone')))
