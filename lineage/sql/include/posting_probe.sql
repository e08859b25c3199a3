-- The rest of the probe of the invalidation postings' GIN index, for `FROM provenance AS p
-- WHERE <its terms> @> ARRAY[<the key>]`: the tenant's records of :'kind' (a kind, 'any' for
-- all but verdict and tombstone, or 'all'), when `complete` says every record of the tenant
-- has postings. The index's terms are the postings with the record's tenant and kind
-- (migration 0033), so a kind asked for is part of the probe: only the tenant's records of
-- that kind are read from the table, not every record below the key. Values, not subqueries:
-- the planner costs the probe by them. Takes :'tenant_id', :'kind'.
      AND (SELECT yes FROM complete)
      AND p.tenant_id = :'tenant_id'
      AND (p.upstream_keys || ARRAY['tenant:' || p.tenant_id, 'kind:' || p.kind])
          @> (ARRAY['tenant:' || :'tenant_id']
              || CASE WHEN :'kind' IN ('any', 'all') THEN '{}' ELSE ARRAY['kind:' || :'kind'] END)
      AND (p.kind = :'kind' OR :'kind' = 'all'
           OR (:'kind' = 'any' AND p.kind NOT IN ('verdict', 'tombstone')))
