-- name: drift_by_produced_by
-- Drift, the eval-regression question: per time bucket (by when the judged record was made),
-- per produced_by (agent and prompt version) and judge, how many claims and hand-off
-- statements were judged, and the share unsupported (claims uncited, hallucinated_id or
-- unsupported; statements unsupported) and merged (statements cross_source_merge), with the
-- change of each rate against the previous bucket of the same produced_by and judge. Counts
-- only current verdicts: per claim (or statement) and judge the newest decisive one, else the
-- newest unknown. :bucket is a fixed interval ('1 day', '7 days'); buckets start 2001-01-01 UTC.
--   psql -v tenant_id=default -v since=2026-09-01 -v bucket='1 day' \
--        -f sql/drift_by_produced_by.sql
WITH current_verdict AS (
    SELECT DISTINCT ON (v.parent_ids[1], v.attributes ->> 'statement', v.attributes ->> 'judge')
           v.parent_ids[1] AS subject_id, v.attributes ->> 'judge' AS judge,
           v.attributes ->> 'verdict' AS verdict
    FROM provenance AS v
    WHERE v.tenant_id = :'tenant_id' AND v.kind = 'verdict'
      AND v.created_at >= :'since'::timestamptz
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
    ORDER BY v.parent_ids[1], v.attributes ->> 'statement', v.attributes ->> 'judge',
             v.attributes ->> 'verdict' = 'unknown', v.created_at DESC, v.context_id DESC
),
per_bucket AS (
    SELECT date_bin((:'bucket'::text)::interval, s.created_at,
                    timestamptz '2001-01-01 00:00:00+00') AS bucket_start,
           s.produced_by, cv.judge,
           count(*) AS judged,
           count(*) FILTER (WHERE cv.verdict IN ('uncited', 'hallucinated_id', 'unsupported'))
               AS unsupported,
           count(*) FILTER (WHERE cv.verdict = 'cross_source_merge') AS merged,
           count(*) FILTER (WHERE cv.verdict = 'unknown') AS unknown
    FROM current_verdict AS cv
    JOIN provenance AS s ON s.tenant_id = :'tenant_id' AND s.context_id = cv.subject_id
    WHERE s.created_at >= :'since'::timestamptz
    GROUP BY 1, 2, 3
),
rated AS (
    SELECT b.*, round(b.unsupported::numeric / b.judged, 4)::float8 AS unsupported_rate,
           round(b.merged::numeric / b.judged, 4)::float8 AS merged_rate
    FROM per_bucket AS b
)
SELECT r.bucket_start, r.produced_by, r.judge, r.judged, r.unsupported, r.merged, r.unknown,
       r.unsupported_rate, r.merged_rate,
       round((r.unsupported_rate - lag(r.unsupported_rate) OVER previous)::numeric, 4)::float8
           AS unsupported_change,
       round((r.merged_rate - lag(r.merged_rate) OVER previous)::numeric, 4)::float8
           AS merged_change
FROM rated AS r
WINDOW previous AS (PARTITION BY r.produced_by, r.judge ORDER BY r.bucket_start)
ORDER BY r.bucket_start, r.produced_by NULLS FIRST, r.judge;
