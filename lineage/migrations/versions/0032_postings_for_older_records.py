"""Records stored before revision 0028 get their invalidation postings, computed in SQL as the
append computes them (lineage.services.postings): a record's own transform version and index
snapshot at depth 0, every parent's postings a level further down, the least depth of each.
Until now a tenant with any such record was answered by the walk (sql/invalidate_*), so an
installation upgraded from before 0028 never had invalidation as an index read.

Level by level: each pass fills the records whose parents all have postings (roots first),
until a pass fills none. A record with a parent not stored (retention dropped it, or a bundle
was imported without it) keeps none, as the append would give it, and so do records below it.

The one rewrite of provenance rows: postings are derived, outside the signed canonical form, so
signatures and the verifiable log still verify. The append-only trigger, the owner's revoked
UPDATE and forced row security are lifted for this transaction alone and put back. Rewritten
rows leave dead versions behind: VACUUM provenance afterwards (README, Upgrading).

Revision ID: 0032
Revises: 0031
"""

from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

# One level of one tenant (%1$L): its records without postings whose parents all have them.
# Every read names the tenant, so on Citus the statement is one router query on its shard
# (Citus plans no correlated subquery over a set-returning function across shards).
FILL_ONE_LEVEL = """
WITH ready AS (
    SELECT r.context_id, r.transform_version, r.index_snapshot, r.parent_ids
    FROM provenance AS r
    WHERE r.tenant_id = %1$L AND r.upstream_keys IS NULL
      AND NOT EXISTS (
          SELECT 1 FROM unnest(r.parent_ids) AS parent (id)
          WHERE NOT EXISTS (SELECT 1 FROM provenance AS p
                            WHERE p.tenant_id = %1$L AND p.context_id = parent.id
                              AND p.upstream_keys IS NOT NULL))
),
postings AS MATERIALIZED (
    SELECT ready.context_id,
           coalesce(array_agg(k.key ORDER BY k.key COLLATE "C")
                    FILTER (WHERE k.key IS NOT NULL), '{}') AS keys,
           coalesce(array_agg(k.depth ORDER BY k.key COLLATE "C")
                    FILTER (WHERE k.key IS NOT NULL), '{}') AS depths
    FROM ready
    LEFT JOIN LATERAL (
        SELECT every.key, min(every.depth) AS depth
        FROM (
            SELECT 'transform_version:' || ready.transform_version, 0
            WHERE ready.transform_version <> ''
            UNION ALL
            SELECT 'index_snapshot:' || ready.index_snapshot, 0
            WHERE ready.index_snapshot <> ''
            UNION ALL
            SELECT up.key, up.depth + 1
            FROM provenance AS p
            CROSS JOIN LATERAL unnest(p.upstream_keys, p.upstream_depths) AS up (key, depth)
            WHERE p.tenant_id = %1$L AND p.context_id = ANY (ready.parent_ids)
        ) AS every (key, depth)
        GROUP BY every.key
    ) AS k ON true
    GROUP BY ready.context_id
)
UPDATE provenance AS t
SET upstream_keys = postings.keys, upstream_depths = postings.depths
FROM postings
WHERE t.tenant_id = %1$L AND t.context_id = postings.context_id AND t.upstream_keys IS NULL
"""

BACKFILL = f"""
DO $$
DECLARE
    forced boolean := (SELECT relforcerowsecurity FROM pg_class
                       WHERE oid = 'provenance'::regclass);
    guarded boolean := EXISTS (SELECT 1 FROM pg_trigger
                               WHERE tgrelid = 'provenance'::regclass
                                 AND tgname = 'provenance_append_only');
    waiting text[] := ARRAY(SELECT DISTINCT tenant_id FROM provenance
                            WHERE upstream_keys IS NULL);
    tenant text;
    filled bigint;
BEGIN
    IF cardinality(waiting) = 0 THEN
        RETURN;
    END IF;
    IF guarded THEN
        ALTER TABLE provenance DISABLE TRIGGER provenance_append_only;
    END IF;
    IF forced THEN
        ALTER TABLE provenance NO FORCE ROW LEVEL SECURITY;
    END IF;
    EXECUTE format('GRANT UPDATE ON provenance TO %I', current_user);
    -- Statistics that know how many records lack postings: planned as one or two, each level
    -- was a nested loop computing every record's postings once per such record (quadratic).
    ANALYZE provenance;
    FOREACH tenant IN ARRAY waiting LOOP
        LOOP
            EXECUTE format($fill${FILL_ONE_LEVEL}$fill$, tenant);
            GET DIAGNOSTICS filled = ROW_COUNT;
            EXIT WHEN filled = 0;
        END LOOP;
    END LOOP;
    EXECUTE format('REVOKE UPDATE ON provenance FROM %I', current_user);
    IF forced THEN
        ALTER TABLE provenance FORCE ROW LEVEL SECURITY;
    END IF;
    IF guarded THEN
        ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_append_only;
    END IF;
END
$$
"""


def upgrade() -> None:
    op.execute(BACKFILL)


def downgrade() -> None:
    """Postings filled here stay: 0028's readers take them as they take an append's."""
