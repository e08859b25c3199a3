-- name: bundle_records
-- The tenant's log leaves in leaf order up to a tree size, each with the leaf hash the log
-- holds (null if its tree lacks it) and its record with its stored signature: the body of an
-- export bundle (lineage export bundle). `expired`: retention dropped the record (its leaf
-- stays in the log), whose columns are null unless it is a forget tombstone, kept past
-- retention in forget_tombstones and carried whole; has_kept_children says whether a kept
-- record names it as a parent, and inherited_roots gives it the root sources that make its kept
-- children's what they are here (its own rows expired with it; children keep them by number,
-- named by invalidation_keys): each source that every kept child holding its roots has (a
-- tombstone holds its source only hashed), a level above the deepest. leaf_created_at: the
-- record's created_at as its leaf kept it (null for leaves logged before migration 0023).
--   psql -v tenant_id=default -v tree_size=100 -f sql/bundle_records.sql
SELECT l.leaf_index, l.hash AS leaf_hash, l.context_id AS leaf_context_id,
       l.created_at AS leaf_created_at, coalesce(r.expired, true) AS expired, r.key_id,
       r.signature,
       r.tenant_id, r.context_id, r.parent_ids, r.kind, r.source_uri, r.content_hash,
       r.transform, r.transform_version, r.produced_by, r.index_snapshot, r.trace_id,
       r.created_at, r.attributes,
       coalesce(kept.children > 0, false) AS has_kept_children,
       coalesce(inherited.roots, '{}') AS inherited_roots
FROM log_leaves AS l
-- The leaf's edge key made apart (OFFSET 0): a cast is not leakproof, so in a probe row
-- security would keep it out of the index condition.
CROSS JOIN LATERAL (SELECT md5(l.context_id)::uuid OFFSET 0) AS edge (key)
LEFT JOIN LATERAL (
    SELECT false AS expired, p.key_id, p.signature, p.tenant_id, p.context_id, p.parent_ids,
           p.kind, p.source_uri, p.content_hash, p.transform, p.transform_version,
           p.produced_by, p.index_snapshot, p.trace_id, p.created_at, p.attributes
    FROM provenance AS p
    WHERE p.tenant_id = :'tenant_id' AND p.context_id = l.context_id
  UNION ALL
    SELECT true, t.key_id, t.signature, t.tenant_id, t.context_id, t.parent_ids,
           t.kind, t.source_uri, t.content_hash, t.transform, t.transform_version,
           t.produced_by, t.index_snapshot, t.trace_id, t.created_at, t.attributes
    FROM forget_tombstones AS t
    WHERE t.tenant_id = :'tenant_id' AND t.context_id = l.context_id
) AS r ON true
-- The two below read only for an expired leaf: their conditions on it are inside, where they
-- skip the reads, not in ON, which drops the rows after reading them. Planned on statistics
-- that knew only other tenants, a kept leaf's read every root source of its tenant (36x).
LEFT JOIN LATERAL (
    SELECT count(*) AS children
    FROM provenance_children AS c
    WHERE c.tenant_id = :'tenant_id' AND c.parent_key = edge.key
      AND coalesce(r.expired, true)
) AS kept ON true
-- Over the kept children that hold their roots (a tombstone holds its source only hashed).
LEFT JOIN LATERAL (
    SELECT jsonb_object_agg(
               -- Named by a probe per source found, never a join the planner may turn over.
               (SELECT substr(named.key, length('source:') + 1) FROM invalidation_keys AS named
                WHERE named.tenant_id = :'tenant_id' AND named.key_no = shared.source_no),
               shared.depth - 1) AS roots
    FROM (
        SELECT rs.source_no, max(rs.depth) AS depth, count(*) AS children,
               min(kids.rooted) AS rooted
        FROM (SELECT child.root_sources, child.root_depths, count(*) OVER () AS rooted
              FROM provenance_children AS c
              JOIN provenance AS child
                  ON child.tenant_id = c.tenant_id
                 AND child.context_id = coalesce(c.context_uuid::text, c.context_id)
                 AND child.created_at = c.created_at  -- the child's month partition alone
              WHERE c.tenant_id = :'tenant_id' AND c.parent_key = edge.key
                AND kept.children > 0 AND child.root_sources IS NOT NULL) AS kids
        CROSS JOIN LATERAL unnest(kids.root_sources, kids.root_depths) AS rs (source_no, depth)
        GROUP BY rs.source_no
    ) AS shared
    WHERE shared.children = shared.rooted
) AS inherited ON true
WHERE l.tenant_id = :'tenant_id' AND l.leaf_index < :tree_size
ORDER BY l.leaf_index;
