-- name: statement_verdicts
-- The current verdict on each statement of the records in :context_ids (summaries, reasoning,
-- plans, tool results), per judge. Verdicts are supported, unsupported, cross_source_merge
-- (entailed only by fusing parents from different root documents; the last two are failing)
-- or unknown. Precedence: a decisive verdict (anything but unknown) stands until a later
-- decisive one by the same judge; unknown is current only while no decisive verdict exists.
--   psql -v tenant_id=default -v context_ids='{summary_1}' -f sql/statement_verdicts.sql
SELECT DISTINCT ON (v.parent_ids[1], v.attributes ->> 'statement', v.attributes ->> 'judge')
       v.context_id, v.parent_ids[1] AS record_id, v.attributes -> 'statement' AS statement,
       v.attributes -> 'span' AS span, v.attributes ->> 'judge' AS judge,
       v.attributes ->> 'judge_version' AS judge_version, v.attributes ->> 'verdict' AS verdict,
       v.attributes ->> 'verdict' IN ('unsupported', 'cross_source_merge') AS failing,
       v.attributes ->> 'reason' AS reason, v.attributes -> 'merged_ids' AS merged_ids,
       v.attributes -> 'merged_sources' AS merged_sources, v.created_at,
       count(*) OVER pair AS verdicts
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
  AND v.attributes ->> 'check' = 'statement'
      -- include: judged_verdict
      AND ((v.attributes ->> 'check' = 'claim' AND v.transform = 'verify_claims'
            AND v.attributes ->> 'verdict'
                IN ('uncited', 'hallucinated_id', 'unsupported', 'supported', 'unknown'))
        OR (v.attributes ->> 'check' = 'statement' AND v.transform = 'verify_statements'
            AND v.attributes ->> 'verdict'
                IN ('supported', 'unsupported', 'cross_source_merge', 'unknown')))
      -- end include: judged_verdict
WINDOW pair AS (PARTITION BY v.parent_ids[1], v.attributes ->> 'statement',
                             v.attributes ->> 'judge')
ORDER BY v.parent_ids[1], v.attributes ->> 'statement', v.attributes ->> 'judge',
         v.attributes ->> 'verdict' = 'unknown', v.created_at DESC, v.context_id DESC;
