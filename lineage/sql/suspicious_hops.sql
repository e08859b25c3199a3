-- name: suspicious_hops
-- For one walk-back from :context_id, each hop that is suspect and why (one row per reason):
--   old_transform_version       made by a transform version older than the newest version of
--                               that transform in the same pipeline (PEP 440 order, else first
--                               seen). The pipeline of an answer is the records its walk-back
--                               reaches: a hop is marked when another hop that fed the same
--                               start used a newer version, never for another pipeline's;
--   source_changed              a document root whose content hash differs from the newest
--                               document root of its source_uri (it was revised since);
--   snapshot_predates_revision  carries an index snapshot first seen before a newer revision of
--                               a document it derives from was recorded;
--   hallucinated_id, unsupported
--                               a claim whose current verdict (per judge, as in
--                               claim_verdicts.sql) is that one; the detail names the judges;
--   cross_source_merge, unsupported
--                               a summary, reasoning, plan or tool result with a statement whose
--                               current verdict (as in statement_verdicts.sql) is that one: it
--                               fused parents from different root documents, or its parents do
--                               not say it; the detail names the statements and judges.
-- The demo, the CLI and the explorer all mark hops with this query.
--   psql -v tenant_id=default -v context_id=ctx_... -v max_depth=20 -f sql/suspicious_hops.sql
WITH RECURSIVE walk (depth, frontier, seen) AS (
    -- The walk-back of sql/walk_back.sql: each ancestor once, at its minimal depth.
    SELECT 0, start.ids, start.ids
    FROM (SELECT ARRAY(SELECT p.context_id FROM provenance AS p
                       WHERE p.tenant_id = :'tenant_id'
                         AND p.context_id = :'context_id') AS ids) AS start
    WHERE cardinality(start.ids) > 0
  UNION ALL
    SELECT w.depth + 1, step.ids, w.seen || step.ids
    FROM walk AS w
    CROSS JOIN LATERAL (
        SELECT ARRAY(
            SELECT parent.id
            FROM provenance AS c CROSS JOIN LATERAL unnest(c.parent_ids) AS parent (id)
            WHERE c.tenant_id = :'tenant_id' AND c.context_id = ANY (w.frontier)
            EXCEPT
            SELECT unnest(w.seen)
        ) AS ids
        OFFSET 0  -- evaluate the step once, not once per use of its result
    ) AS step
    WHERE w.depth <= :max_depth AND cardinality(w.frontier) > 0
),
hop AS MATERIALIZED (
    SELECT r.*, a.depth
    FROM walk AS a
    CROSS JOIN LATERAL unnest(a.frontier) AS node (id)
    JOIN provenance AS r ON r.tenant_id = :'tenant_id' AND r.context_id = node.id
    WHERE a.depth <= :max_depth
),
hop_ancestor (origin, context_id, depth) AS (
    -- For each snapshot-carrying hop, the hops it derives from (itself included), up to
    -- :max_depth above it. Within the walk-back: the ancestors of a hop are hops.
    SELECT h.context_id, h.context_id, 0 FROM hop AS h WHERE h.index_snapshot IS NOT NULL
  UNION
    SELECT u.origin, parent.id, u.depth + 1
    FROM hop_ancestor AS u
    JOIN hop AS c ON c.context_id = u.context_id
    CROSS JOIN LATERAL unnest(c.parent_ids) AS parent (id)
    WHERE u.depth < :max_depth
),
newest_version AS (
    -- The newest version of each transform among the walk's own hops, and one hop it made.
    SELECT DISTINCT ON (h.transform) h.transform, h.transform_version, h.context_id
    FROM hop AS h
    JOIN transform_versions AS v ON v.tenant_id = :'tenant_id' AND v.transform = h.transform
                                 AND v.transform_version = h.transform_version
    ORDER BY h.transform, (v.version_key IS NOT NULL) DESC, v.version_key DESC,
             v.first_seen DESC, h.context_id
),
newest_root AS (
    SELECT DISTINCT ON (n.source_uri) n.source_uri, n.context_id, n.content_hash, n.created_at
    FROM provenance AS n
    WHERE n.tenant_id = :'tenant_id' AND n.kind = 'document' AND n.parent_ids = '{}'
      AND n.source_uri IN (SELECT source_uri FROM hop)
    ORDER BY n.source_uri, n.created_at DESC, n.context_id DESC
),
snapshot_root AS (
    -- The roots each snapshot-carrying hop derives from, and when the snapshot was first seen.
    SELECT h.context_id, h.index_snapshot, root.source_uri, root.created_at AS root_created_at,
           (SELECT min(s.created_at) FROM provenance AS s
            WHERE s.tenant_id = :'tenant_id' AND s.index_snapshot = h.index_snapshot)
               AS snapshot_first_seen
    FROM hop AS h
    JOIN (SELECT DISTINCT up.origin, up.context_id FROM hop_ancestor AS up) AS up
      ON up.origin = h.context_id
    JOIN hop AS root ON root.context_id = up.context_id
    WHERE root.kind = 'document' AND root.parent_ids = '{}' AND root.source_uri IS NOT NULL
),
claim_verdict AS (
    SELECT DISTINCT ON (v.parent_ids[1], v.attributes ->> 'judge')
           v.parent_ids[1] AS claim_id, v.attributes ->> 'judge' AS judge,
           v.attributes ->> 'verdict' AS verdict, v.attributes ->> 'reason' AS reason
    FROM provenance_children AS e
    JOIN provenance AS v ON v.tenant_id = :'tenant_id' AND v.context_id = e.context_id
    WHERE e.tenant_id = :'tenant_id'
      AND e.parent_id IN (SELECT context_id FROM hop WHERE kind = 'claim')
      AND v.kind = 'verdict' AND cardinality(v.parent_ids) = 1
      AND v.attributes ->> 'check' = 'claim'
    ORDER BY v.parent_ids[1], v.attributes ->> 'judge', v.attributes ->> 'verdict' = 'unknown',
             v.created_at DESC, v.context_id DESC
),
statement_verdict AS (
    SELECT DISTINCT ON (v.parent_ids[1], v.attributes ->> 'statement', v.attributes ->> 'judge')
           v.parent_ids[1] AS record_id, v.attributes ->> 'statement' AS statement,
           v.attributes ->> 'judge' AS judge, v.attributes ->> 'verdict' AS verdict,
           v.attributes ->> 'reason' AS reason
    FROM provenance AS v
    WHERE v.tenant_id = :'tenant_id' AND v.kind = 'verdict'
      AND v.parent_ids && ARRAY(SELECT context_id FROM hop
                                WHERE kind IN ('summary', 'reasoning', 'plan', 'tool_call'))
      AND cardinality(v.parent_ids) = 1
      AND v.attributes ->> 'check' = 'statement'
    ORDER BY v.parent_ids[1], v.attributes ->> 'statement', v.attributes ->> 'judge',
             v.attributes ->> 'verdict' = 'unknown', v.created_at DESC, v.context_id DESC
)
SELECT h.context_id, h.depth, h.kind, 'old_transform_version' AS reason,
       format('%s is older than %s, which made %s in the same walk', h.transform_version,
              nv.transform_version, nv.context_id) AS detail
FROM hop AS h
JOIN newest_version AS nv ON nv.transform = h.transform
WHERE h.transform_version IS DISTINCT FROM nv.transform_version
UNION ALL
SELECT h.context_id, h.depth, h.kind, 'source_changed',
       format('%s was revised: this record has %s…, the newest (%s) has %s…', h.source_uri,
              left(h.content_hash, 19), nr.context_id, left(nr.content_hash, 19))
FROM hop AS h
JOIN newest_root AS nr ON nr.source_uri = h.source_uri
WHERE h.kind = 'document' AND h.parent_ids = '{}' AND h.content_hash <> nr.content_hash
UNION ALL
SELECT DISTINCT sr.context_id, h.depth, h.kind, 'snapshot_predates_revision',
       format('index snapshot %s was first seen before %s was revised (newest revision %s)',
              sr.index_snapshot, sr.source_uri, nr.context_id)
FROM snapshot_root AS sr
JOIN hop AS h ON h.context_id = sr.context_id
JOIN newest_root AS nr ON nr.source_uri = sr.source_uri
WHERE nr.created_at > sr.snapshot_first_seen
  AND NOT EXISTS (SELECT 1 FROM hop_ancestor AS up
                  WHERE up.origin = sr.context_id AND up.context_id = nr.context_id)
UNION ALL
SELECT h.context_id, h.depth, h.kind, cv.verdict,
       string_agg(format('judge %s found it %s: %s', cv.judge, cv.verdict, cv.reason), '; '
                  ORDER BY cv.judge)
FROM hop AS h
JOIN claim_verdict AS cv ON cv.claim_id = h.context_id
WHERE h.kind = 'claim' AND cv.verdict IN ('hallucinated_id', 'unsupported')
GROUP BY h.context_id, h.depth, h.kind, cv.verdict
UNION ALL
SELECT h.context_id, h.depth, h.kind, sv.verdict,
       string_agg(format('statement %s: judge %s found it %s: %s', sv.statement, sv.judge,
                         sv.verdict, sv.reason), '; ' ORDER BY sv.statement, sv.judge)
FROM hop AS h
JOIN statement_verdict AS sv ON sv.record_id = h.context_id
WHERE sv.verdict IN ('cross_source_merge', 'unsupported')
GROUP BY h.context_id, h.depth, h.kind, sv.verdict
ORDER BY 2, 1, 4;
