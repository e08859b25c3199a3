"""Descendant walks: the blast radius of a source as one function, so that the listing of its
ids and of its records (sql/blast_radius_ids_by_source.sql, sql/blast_radius_by_source.sql)
share it; and a GIN probe per parent id whatever the statistics say.

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

UPGRADE = """
-- Every record with p_source_uri (all its revisions) and everything derived from them, each
-- once, with its kind and minimal depth, without reading the records. When every record with
-- the source is a root known to root_sources, the answer is one index-only range of
-- root_sources; otherwise (a derived record carries the source_uri too, or the roots were
-- inserted around append_records) it is the walk down parent_ids. Both give the same rows;
-- truncated says that records of the kinds asked for lie deeper than p_max_depth (exactly, from
-- root_sources; the walk says so whenever its last level had more below it, which covers it).
-- p_kind is a kind, 'any' (all but verdict and tombstone) or 'all'. One SELECT in SQL, so
-- the planner inlines it and the kind becomes part of the index range.
CREATE FUNCTION lineage_source_radius(
    p_tenant_id text, p_source_uri text, p_kind text, p_max_depth int
)
RETURNS TABLE (context_id text, kind text, depth int, truncated boolean)
LANGUAGE sql STABLE AS $$
    WITH start AS MATERIALIZED (
        SELECT s.context_id,
               s.parent_ids = '{}'
               AND EXISTS (SELECT 1 FROM root_sources AS own
                           WHERE own.tenant_id = p_tenant_id
                             AND own.source_uri = p_source_uri
                             AND own.kind = s.kind AND own.context_id = s.context_id) AS root
        FROM provenance AS s
        WHERE s.tenant_id = p_tenant_id AND s.source_uri = p_source_uri
    ),
    roots_only AS MATERIALIZED (
        SELECT bool_and(start.root) AS yes FROM start
    )
    SELECT listed.context_id, listed.kind, listed.depth, listed.truncated
    FROM (
        -- Truncated when records of the kinds asked for lie deeper than p_max_depth, read in
        -- the same range: a check over every kind of a source read all of a hot document's
        -- 1.2M rows to list its 206k answers (3.3 of 3.6 s at 10M records).
        SELECT rs.context_id, rs.kind, rs.depth,
               bool_or(rs.depth > p_max_depth) OVER () AS truncated
        FROM root_sources AS rs
        WHERE (SELECT yes FROM roots_only)
          AND rs.tenant_id = p_tenant_id AND rs.source_uri = p_source_uri
          AND (rs.kind = p_kind OR p_kind = 'all'
               OR (p_kind = 'any' AND rs.kind NOT IN ('verdict', 'tombstone')))
    ) AS listed
    WHERE listed.depth <= p_max_depth
  UNION ALL
    SELECT w.context_id, r.kind, w.depth, w.truncated
    FROM lineage_descendants(p_tenant_id, ARRAY(SELECT start.context_id FROM start),
                             p_max_depth) AS w
    CROSS JOIN LATERAL (
        SELECT p.kind FROM provenance AS p
        WHERE p.tenant_id = p_tenant_id AND p.context_id = w.context_id
        OFFSET 0  -- a primary-key probe per walked record, never a scan of the tenant
    ) AS r
    WHERE NOT (SELECT yes FROM roots_only)
      AND (r.kind = p_kind OR p_kind = 'all'
           OR (p_kind = 'any' AND r.kind NOT IN ('verdict', 'tombstone')))
$$;

-- Children of a set of records, one GIN probe per parent id (as in 0002), kept to that plan:
-- on a tenant appended since the last ANALYZE the planner took the tenant's rows for a few
-- dozen and rescanned them once per parent id (3,000 chunks of a new document: 3.2 s
-- instead of 25 ms). The children are found first, a probe per parent id, and read by primary
-- key after; hiding tenant_id from the b-tree indexes and ruling out the sequential scan
-- leaves the GIN probe as the only way to find them.
CREATE OR REPLACE FUNCTION lineage_children(p_tenant_id text, p_parent_ids text[])
RETURNS SETOF provenance
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp
SET enable_seqscan = off ROWS 100 AS $$
    SELECT c.*
    FROM (
        SELECT DISTINCT child.context_id
        FROM unnest(p_parent_ids) AS parent (id)
        CROSS JOIN LATERAL (
            SELECT x.context_id FROM provenance AS x
            WHERE x.parent_ids @> ARRAY[parent.id] AND x.tenant_id || '' = p_tenant_id
            OFFSET 0  -- probed for each parent id on its own, never joined the other way round
        ) AS child
    ) AS found
    JOIN provenance AS c ON c.tenant_id = p_tenant_id AND c.context_id = found.context_id
    WHERE p_tenant_id = lineage_walk_tenant(p_tenant_id)
$$;
"""

DOWNGRADE = """
DROP FUNCTION lineage_source_radius(text, text, text, int);
CREATE OR REPLACE FUNCTION lineage_children(p_tenant_id text, p_parent_ids text[])
RETURNS SETOF provenance
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp ROWS 100 AS $$
    SELECT c.*
    FROM provenance AS c
    WHERE c.tenant_id = p_tenant_id
      AND p_tenant_id = lineage_walk_tenant(p_tenant_id)
      AND c.context_id IN (
          SELECT child.context_id
          FROM unnest(p_parent_ids) AS parent (id)
          CROSS JOIN LATERAL (
              SELECT x.context_id FROM provenance AS x
              WHERE x.tenant_id = p_tenant_id AND x.parent_ids @> ARRAY[parent.id]
          ) AS child
      )
$$;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
