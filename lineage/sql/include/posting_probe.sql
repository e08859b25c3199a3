-- The rest of a read of the invalidation postings by their b-tree, for `FROM invalidation_postings
-- AS ip CROSS JOIN LATERAL unnest(ip.context_uuids::text[] || ip.context_ids) ... WHERE ip.key_no
-- = <the key's number>`: the tenant's records of :'kind' (a kind, 'any' for all but verdict and
-- tombstone, or 'all'), when `complete` says every record of the tenant has postings. Equality
-- only: under row security an index condition needs a leakproof operator, which `@>` on arrays is
-- not (migration 0034). Takes :'tenant_id', :'kind'.
      AND (SELECT yes FROM complete)
      AND ip.tenant_id = :'tenant_id'
      AND (ip.kind = :'kind' OR :'kind' = 'all'
           OR (:'kind' = 'any' AND ip.kind NOT IN ('verdict', 'tombstone')))
