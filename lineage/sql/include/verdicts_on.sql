-- The records whose edges name one of :context_ids as a parent, as `v` (the verdicts among
-- them are the query's to pick). Each parent's edge key comes from an InitPlan's array: the
-- cast is not leakproof, so in the probe itself row security would keep it out of the index
-- condition.
FROM provenance_children AS e
JOIN provenance AS v
    ON v.tenant_id = :'tenant_id'
   AND v.context_id = coalesce(e.context_uuid::text, e.context_id)
WHERE e.tenant_id = :'tenant_id'
  AND e.parent_key = ANY (ARRAY(SELECT md5(id)::uuid
                                FROM unnest(:'context_ids'::text[]) AS id))
