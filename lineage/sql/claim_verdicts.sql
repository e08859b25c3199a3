-- name: claim_verdicts
-- The current verdict on each claim in :context_ids, per judge: the newest decisive claim
-- verdict record (kind verdict, its one parent the claim) for each (claim, judge), else the
-- newest unknown. Older verdicts stay
-- in provenance; `verdicts` counts them all, `first_verdict_at` dates the oldest. Precedence:
-- a decisive verdict (anything but unknown) stands until a later decisive one by the same
-- judge, so a rerun that cannot see the texts does not hide what an earlier run found.
-- Verdicts are uncited, hallucinated_id, unsupported (these three are failing), supported or
-- unknown.
--   psql -v tenant_id=default -v context_ids='{claim_1}' -f sql/claim_verdicts.sql
SELECT DISTINCT ON (v.parent_ids[1], v.attributes ->> 'judge')
       v.context_id, v.parent_ids[1] AS claim_id, v.attributes ->> 'judge' AS judge,
       v.attributes ->> 'judge_version' AS judge_version, v.attributes ->> 'verdict' AS verdict,
       v.attributes ->> 'verdict' IN ('uncited', 'hallucinated_id', 'unsupported') AS failing,
       v.attributes ->> 'reason' AS reason, v.attributes -> 'cited_ids' AS cited_ids,
       v.attributes -> 'hallucinated_ids' AS hallucinated_ids,
       v.created_at,
       count(*) OVER pair AS verdicts,
       min(v.created_at) OVER pair AS first_verdict_at
-- include: verdicts_on
FROM provenance_children AS e
JOIN provenance AS v
    ON v.tenant_id = :'tenant_id'
   AND v.context_id = coalesce(e.context_uuid::text, e.context_id)
WHERE e.tenant_id = :'tenant_id'
  AND e.parent_key = ANY (ARRAY(SELECT md5(id)::uuid
                                FROM unnest(:'context_ids'::text[]) AS id))
-- end include: verdicts_on
  AND v.kind = 'verdict'
  AND cardinality(v.parent_ids) = 1
  AND v.attributes ->> 'check' = 'claim'
      -- include: judged_verdict
      AND ((v.attributes ->> 'check' = 'claim' AND v.transform = 'verify_claims'
            AND v.attributes ->> 'verdict'
                IN ('uncited', 'hallucinated_id', 'unsupported', 'supported', 'unknown'))
        OR (v.attributes ->> 'check' = 'statement' AND v.transform = 'verify_statements'
            AND v.attributes ->> 'verdict'
                IN ('supported', 'unsupported', 'cross_source_merge', 'unknown')))
      -- end include: judged_verdict
WINDOW pair AS (PARTITION BY v.parent_ids[1], v.attributes ->> 'judge')
ORDER BY v.parent_ids[1], v.attributes ->> 'judge', v.attributes ->> 'verdict' = 'unknown',
         v.created_at DESC, v.context_id DESC;
