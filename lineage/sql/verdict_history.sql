-- name: verdict_history
-- Every verdict recorded on the records in :context_ids (claims, or statements of hand-offs),
-- newest first: what each judge said and when, including verdicts no longer current.
--   psql -v tenant_id=default -v context_ids='{claim_1}' -f sql/verdict_history.sql
SELECT v.context_id, v.parent_ids[1] AS subject_id, v.attributes ->> 'check' AS check_kind,
       v.attributes -> 'statement' AS statement, v.attributes ->> 'judge' AS judge,
       v.attributes ->> 'judge_version' AS judge_version, v.attributes ->> 'verdict' AS verdict,
       v.attributes ->> 'reason' AS reason, v.created_at
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
  AND v.attributes ->> 'check' IN ('claim', 'statement')
      -- include: judged_verdict
      AND ((v.attributes ->> 'check' = 'claim' AND v.transform = 'verify_claims'
            AND v.attributes ->> 'verdict'
                IN ('uncited', 'hallucinated_id', 'unsupported', 'supported', 'unknown'))
        OR (v.attributes ->> 'check' = 'statement' AND v.transform = 'verify_statements'
            AND v.attributes ->> 'verdict'
                IN ('supported', 'unsupported', 'cross_source_merge', 'unknown')))
      -- end include: judged_verdict
ORDER BY v.parent_ids[1], v.created_at DESC, v.context_id DESC;
