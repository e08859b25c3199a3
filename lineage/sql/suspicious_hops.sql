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
WITH RECURSIVE walk (depth, frontier, seen, found) AS (
    -- The walk-back of sql/walk_back.sql: each ancestor once, at its minimal depth.
    -- No records found yet, typed as the table's rows (on Citus, as its shard's)
    SELECT 0, ARRAY[:'context_id'], ARRAY[:'context_id'],
           ARRAY(SELECT c FROM provenance AS c WHERE c.tenant_id = :'tenant_id' AND false)
  -- include: walk_up
  UNION ALL
    SELECT w.depth + 1, step.ids, w.seen || step.ids, step.found
    FROM walk AS w
    CROSS JOIN LATERAL (
        SELECT level.found, ARRAY(
            -- Upward: parents of the frontier's records, found by primary key.
            SELECT parent.id
            FROM unnest(level.found) AS c CROSS JOIN LATERAL unnest(c.parent_ids) AS parent (id)
            EXCEPT
            SELECT unnest(w.seen)
        ) AS ids
        FROM (SELECT ARRAY(SELECT c FROM public.provenance AS c
                           WHERE c.tenant_id = :'tenant_id' AND c.context_id = ANY (w.frontier))
                     AS found
              OFFSET 0) AS level
        OFFSET 0  -- evaluate the step once, not once per use of its result
    ) AS step
    WHERE w.depth <= :max_depth AND cardinality(w.frontier) > 0
  -- end include: walk_up
),
hop AS MATERIALIZED (
    -- Each row of the walk holds the records of the frontier before it.
    SELECT r.*, a.depth - 1 AS depth
    FROM walk AS a
    CROSS JOIN LATERAL unnest(a.found) AS r
),
hop_edge AS MATERIALIZED (
    -- The walk's links, child to parent, with what the marks need of the child (a hop; so is a
    -- parent within reach), so that following them down needs no join with hop.
    SELECT parent.id AS parent, h.context_id, h.depth, h.kind, h.index_snapshot
    FROM hop AS h CROSS JOIN LATERAL unnest(h.parent_ids) AS parent (id)
),
newest_version AS MATERIALIZED (
    -- The newest version of each transform among the walk's own hops, and one hop it made.
    SELECT DISTINCT ON (h.transform) h.transform, h.transform_version, h.context_id
    FROM hop AS h
    JOIN transform_versions AS v ON v.tenant_id = :'tenant_id' AND v.transform = h.transform
                                 AND v.transform_version = h.transform_version
    ORDER BY h.transform, (v.version_key IS NOT NULL) DESC, v.version_key DESC,
             v.first_seen DESC, h.context_id
),
newest_root AS MATERIALIZED (
    SELECT DISTINCT ON (n.source_uri) n.source_uri, n.context_id, n.content_hash, n.created_at
    FROM provenance AS n
    WHERE n.tenant_id = :'tenant_id' AND n.kind = 'document' AND n.parent_ids = '{}'
      AND n.source_uri IN (SELECT source_uri FROM hop)
    ORDER BY n.source_uri, n.created_at DESC, n.context_id DESC
),
snapshot_seen AS MATERIALIZED (
    -- When each index snapshot of the walk was first seen: one aggregate per snapshot.
    SELECT s.index_snapshot, min(s.created_at) AS first_seen
    FROM provenance AS s
    WHERE s.tenant_id = :'tenant_id'
      AND s.index_snapshot IN (SELECT index_snapshot FROM hop)
    GROUP BY s.index_snapshot
),
revised_root AS MATERIALIZED (
    -- The walk's document roots whose source has a revision newer than the first sighting of
    -- one of the walk's snapshots (that revision among them, if the walk reaches it): only
    -- these can mark a hop, so only these are followed down.
    SELECT r.context_id, r.depth, r.kind, r.index_snapshot, r.source_uri,
           nr.context_id AS newest_id, nr.created_at AS revised_at
    FROM hop AS r
    JOIN newest_root AS nr ON nr.source_uri = r.source_uri
    WHERE r.kind = 'document' AND r.parent_ids = '{}'
      AND nr.created_at > (SELECT min(first_seen) FROM snapshot_seen)
),
revised_descendant (root_id, below, context_id, depth, kind, index_snapshot) AS (
    -- Each of those roots and the hops derived from it, up to :max_depth below it.
    SELECT r.context_id, 0, r.context_id, r.depth, r.kind, r.index_snapshot
    FROM revised_root AS r
  UNION
    SELECT d.root_id, d.below + 1, e.context_id, e.depth, e.kind, e.index_snapshot
    FROM revised_descendant AS d
    JOIN hop_edge AS e ON e.parent = d.context_id
    WHERE d.below < :max_depth
),
snapshot_source AS (
    -- Per snapshot-carrying hop and source revised since its snapshot was first seen: whether
    -- the hop derives from the newest revision too.
    SELECT d.context_id, d.depth, d.kind, d.index_snapshot, r.source_uri, r.newest_id,
           bool_or(r.context_id = r.newest_id) AS has_newest
    FROM revised_descendant AS d
    JOIN revised_root AS r ON r.context_id = d.root_id
    JOIN snapshot_seen AS seen ON seen.index_snapshot = d.index_snapshot
    WHERE r.revised_at > seen.first_seen
    GROUP BY d.context_id, d.depth, d.kind, d.index_snapshot, r.source_uri, r.newest_id
),
claim_verdict AS (
    SELECT DISTINCT ON (v.parent_ids[1], v.attributes ->> 'judge')
           v.parent_ids[1] AS claim_id, v.attributes ->> 'judge' AS judge,
           v.attributes ->> 'verdict' AS verdict, v.attributes ->> 'reason' AS reason
    FROM provenance_children AS e
    JOIN provenance AS v
        ON v.tenant_id = :'tenant_id'
       AND v.context_id = coalesce(e.context_uuid::text, e.context_id)
    WHERE e.tenant_id = :'tenant_id'
      AND e.parent_key IN (SELECT md5(context_id)::uuid FROM hop WHERE kind = 'claim' OFFSET 0)
      AND v.kind = 'verdict' AND cardinality(v.parent_ids) = 1
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
SELECT s.context_id, s.depth, s.kind, 'snapshot_predates_revision',
       format('index snapshot %s was first seen before %s was revised (newest revision %s)',
              s.index_snapshot, s.source_uri, s.newest_id)
FROM snapshot_source AS s
WHERE NOT s.has_newest
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
ORDER BY 2, 1, 4, 5;
