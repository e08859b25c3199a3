-- name: claims_by_produced_by
-- Drift: how often claims fail, per time bucket (by when the claim was recorded), per
-- produced_by (the agent and prompt version that made the claim) and per judge, counting only
-- each claim's current verdict (per claim and judge, as in claim_verdicts.sql: the newest
-- decisive one, else the newest unknown). Failing means uncited,
-- hallucinated_id or unsupported. :bucket is an interval of seconds to weeks ('1 hour',
-- '1 day', '7 days'); weekly buckets start on Mondays, UTC.
--   psql -v tenant_id=default -v since=2026-09-01 -v bucket='1 day' \
--        -f sql/claims_by_produced_by.sql
WITH current_verdict AS (
    SELECT DISTINCT ON (v.parent_ids[1], v.attributes ->> 'judge')
           v.parent_ids[1] AS claim_id, v.attributes ->> 'judge' AS judge,
           v.attributes ->> 'verdict' AS verdict
    FROM provenance AS v
    WHERE v.tenant_id = :'tenant_id' AND v.kind = 'verdict'
      AND v.created_at >= :'since'::timestamptz
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
    ORDER BY v.parent_ids[1], v.attributes ->> 'judge', v.attributes ->> 'verdict' = 'unknown',
             v.created_at DESC, v.context_id DESC
)
SELECT date_bin((:'bucket'::text)::interval, c.created_at,
                timestamptz '2001-01-01 00:00:00+00') AS bucket_start,
       c.produced_by, cv.judge,
       count(*) AS claims,
       count(*) FILTER (WHERE cv.verdict IN ('uncited', 'hallucinated_id', 'unsupported'))
           AS failing,
       round(count(*) FILTER (WHERE cv.verdict IN ('uncited', 'hallucinated_id', 'unsupported'))
             ::numeric / count(*), 4)::float8 AS failing_rate,
       count(*) FILTER (WHERE cv.verdict = 'uncited') AS uncited,
       count(*) FILTER (WHERE cv.verdict = 'hallucinated_id') AS hallucinated_id,
       count(*) FILTER (WHERE cv.verdict = 'unsupported') AS unsupported,
       count(*) FILTER (WHERE cv.verdict = 'supported') AS supported,
       count(*) FILTER (WHERE cv.verdict = 'unknown') AS unknown
FROM current_verdict AS cv
JOIN provenance AS c
  ON c.tenant_id = :'tenant_id' AND c.context_id = cv.claim_id AND c.kind = 'claim'
WHERE c.created_at >= :'since'::timestamptz
GROUP BY 1, 2, 3
ORDER BY 1, 2 NULLS FIRST, 3;
