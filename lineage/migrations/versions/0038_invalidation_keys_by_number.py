"""Invalidation keys by number: a record keeps its root sources and upstream keys as numbers
(`root_sources`, `upstream_keys`: integer[]) in its tenant's `invalidation_keys`, which names
each key once ('source:' and a source_uri, 'transform_version:…', 'index_snapshot:…'); the
append numbers a key the first time it comes.

As text, the two arrays were 465 of the 855 bytes of a record's row on the tutorial DAG
(bench/RESULTS-write-bytes.md): an answer's eight source URIs and four keys, each spelled out
again on every record below them. As numbers they are four bytes an element. The postings keep
their text key: one row lists up to 1,000 records.

Each record's row is rewritten once, as migration 0036 did (the append-only trigger, the
owner's revoked UPDATE and forced row security lifted for this transaction alone); VACUUM
provenance afterwards (README, Upgrading). Keys are numbered per tenant in key order.

Revision ID: 0038
Revises: 0037
"""

from alembic import op

from lineage.db import functions, tenant_rewrite

revision = "0038"
down_revision = "0037"
branch_labels = None
depends_on = None

# The append numbers keys; the downgrade loads the one 0036 loaded again.
FUNCTIONS = ("lineage_append",)

CREATE = """
CREATE TABLE invalidation_keys (
    tenant_id text    NOT NULL,
    key_no    integer NOT NULL,
    key       text    NOT NULL,
    PRIMARY KEY (tenant_id, key_no),
    UNIQUE (tenant_id, key)
)
"""
# One tenant (%1$L) at a time, every read naming it: on Citus each is a router statement.
# Every key a record or a posting of the tenant holds, numbered in key order.
NUMBER_KEYS = """
INSERT INTO invalidation_keys (tenant_id, key_no, key)
SELECT %1$L, row_number() OVER (ORDER BY k.key), k.key
FROM (SELECT unnest(p.upstream_keys) FROM provenance AS p WHERE p.tenant_id = %1$L
      UNION
      SELECT 'source:' || unnest(p.root_sources) FROM provenance AS p WHERE p.tenant_id = %1$L
      UNION
      SELECT ip.key FROM invalidation_postings AS ip WHERE ip.tenant_id = %1$L) AS k (key)
"""
# Each record with a key once, by the keys' numbers in the arrays' order; the text arrays are
# emptied in the same write, so the rewritten row does not carry them.
FILL_NUMBERS = """
UPDATE provenance AS t
SET upstream_key_numbers = CASE WHEN t.upstream_keys IS NOT NULL
                                THEN coalesce(n.upstream_keys, '{}') END,
    root_source_numbers = CASE WHEN t.root_sources IS NOT NULL
                               THEN coalesce(n.root_sources, '{}') END,
    upstream_keys = NULL, root_sources = NULL
FROM (SELECT e.context_id, e.created_at,
             array_agg(k.key_no ORDER BY e.o) FILTER (WHERE e.upstream) AS upstream_keys,
             array_agg(k.key_no ORDER BY e.o) FILTER (WHERE NOT e.upstream) AS root_sources
      FROM (SELECT p.context_id, p.created_at, true, u.key, u.o
            FROM provenance AS p
            CROSS JOIN LATERAL unnest(p.upstream_keys) WITH ORDINALITY AS u (key, o)
            WHERE p.tenant_id = %1$L
            UNION ALL
            SELECT p.context_id, p.created_at, false, 'source:' || u.uri, u.o
            FROM provenance AS p
            CROSS JOIN LATERAL unnest(p.root_sources) WITH ORDINALITY AS u (uri, o)
            WHERE p.tenant_id = %1$L) AS e (context_id, created_at, upstream, key, o)
      JOIN invalidation_keys AS k ON k.tenant_id = %1$L AND k.key = e.key
      GROUP BY e.context_id, e.created_at) AS n
WHERE t.tenant_id = %1$L AND t.context_id = n.context_id AND t.created_at = n.created_at
"""
# Records whose arrays are empty (the statement above emptied every other's text).
FILL_EMPTY = """
UPDATE provenance AS t
SET upstream_key_numbers = CASE WHEN t.upstream_keys IS NOT NULL THEN '{}'::integer[] END,
    root_source_numbers = CASE WHEN t.root_sources IS NOT NULL THEN '{}'::integer[] END,
    upstream_keys = NULL, root_sources = NULL
WHERE t.tenant_id = %1$L AND (t.upstream_keys IS NOT NULL OR t.root_sources IS NOT NULL)
"""
UNFILL_NUMBERS = """
UPDATE provenance AS t
SET upstream_key_texts = CASE WHEN t.upstream_keys IS NOT NULL
                              THEN coalesce(n.upstream_keys, '{}') END,
    root_source_texts = CASE WHEN t.root_sources IS NOT NULL
                             THEN coalesce(n.root_sources, '{}') END
FROM (SELECT e.context_id, e.created_at,
             array_agg(k.key ORDER BY e.o) FILTER (WHERE e.upstream) AS upstream_keys,
             array_agg(substr(k.key, length('source:') + 1) ORDER BY e.o)
                 FILTER (WHERE NOT e.upstream) AS root_sources
      FROM (SELECT p.context_id, p.created_at, true, u.no, u.o
            FROM provenance AS p
            CROSS JOIN LATERAL unnest(p.upstream_keys) WITH ORDINALITY AS u (no, o)
            WHERE p.tenant_id = %1$L
            UNION ALL
            SELECT p.context_id, p.created_at, false, u.no, u.o
            FROM provenance AS p
            CROSS JOIN LATERAL unnest(p.root_sources) WITH ORDINALITY AS u (no, o)
            WHERE p.tenant_id = %1$L) AS e (context_id, created_at, upstream, no, o)
      JOIN invalidation_keys AS k ON k.tenant_id = %1$L AND k.key_no = e.no
      GROUP BY e.context_id, e.created_at) AS n
WHERE t.tenant_id = %1$L AND t.context_id = n.context_id AND t.created_at = n.created_at
"""
UNFILL_EMPTY = """
UPDATE provenance AS t
SET upstream_key_texts = CASE WHEN t.upstream_keys IS NOT NULL THEN '{}'::text[] END,
    root_source_texts = CASE WHEN t.root_sources IS NOT NULL THEN '{}'::text[] END
WHERE t.tenant_id = %1$L
  AND (t.upstream_keys = '{}' OR t.root_sources = '{}')
  AND t.upstream_key_texts IS NULL AND t.root_source_texts IS NULL
"""
LIFTED = ("tenants", "provenance", "invalidation_postings", "invalidation_keys")
# Records that predate postings (migration 0028 left them to the service's backfill).
UPSTREAM_UNKNOWN = (
    "CREATE INDEX provenance_upstream_unknown ON provenance (tenant_id) WHERE upstream_keys IS NULL"
)


def _swap(new: dict[str, str]) -> None:
    """The filled columns take the old ones' names (the old ones, and the index on one, go)."""
    for old, filled in new.items():
        op.execute(f"ALTER TABLE provenance DROP COLUMN {old}")
        op.execute(f"ALTER TABLE provenance RENAME COLUMN {filled} TO {old}")
    op.execute(UPSTREAM_UNKNOWN)


def upgrade() -> None:
    op.execute(CREATE)
    tenant_rewrite.confine_new_table("invalidation_keys")
    op.execute("ALTER TABLE provenance ADD COLUMN upstream_key_numbers integer[]")
    op.execute("ALTER TABLE provenance ADD COLUMN root_source_numbers integer[]")
    op.execute(
        tenant_rewrite.each_tenant(
            ";;".join((NUMBER_KEYS, FILL_NUMBERS, FILL_EMPTY)), LIFTED, update=True
        )
    )
    _swap({"upstream_keys": "upstream_key_numbers", "root_sources": "root_source_numbers"})
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    op.execute("ALTER TABLE provenance ADD COLUMN upstream_key_texts text[]")
    op.execute("ALTER TABLE provenance ADD COLUMN root_source_texts text[]")
    op.execute(
        tenant_rewrite.each_tenant(
            ";;".join((UNFILL_NUMBERS, UNFILL_EMPTY)),
            LIFTED,
            update=True,
        )
    )
    _swap({"upstream_keys": "upstream_key_texts", "root_sources": "root_source_texts"})
    op.execute("DROP TABLE invalidation_keys")
    functions.create(op.get_bind(), "0036", FUNCTIONS)
