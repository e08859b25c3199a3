"""The verifiable log keeps each leaf's hash on its log_leaves row and the subtree hashes of
every fourth level above it in log_nodes; a proof folds any other subtree from the at most 8
kept ones under it (lineage.verifiable_log.storage.KEPT_EVERY).

Every complete subtree had a row of its own: about two log_nodes rows a leaf beside the leaf's
own, 332 bytes stored a record (bench/RESULTS-write-bytes.md), more than the tutorial table's
whole row. Now the leaf's hash is 33 bytes on the row it has anyway and log_nodes holds a
sixteenth of a row a leaf. The proofs and checkpoints are the same bytes.

The upgrade moves each leaf's hash onto its row and deletes the subtrees no longer kept; a
check on log_nodes keeps its levels to those. The downgrade hashes the dropped levels again
from the kept ones below them (SHA-256 of 0x01 and the two children, RFC 6962).

Revision ID: 0042
Revises: 0041
"""

from alembic import op

from lineage.db import functions, tenant_rewrite

revision = "0042"
down_revision = "0041"
branch_labels = None
depends_on = None

FUNCTIONS = ("lineage_log_advance",)
EARLIER = "0039"
LOG_TABLES = ("log_leaves", "log_nodes", "log_heads")
KEPT_EVERY = 4  # as lineage.verifiable_log.storage has it at this revision

# One tenant (%1$L) at a time, every statement naming it: on Citus each is a router statement.
LEAF_HASHES_ON_LEAVES = """
UPDATE log_leaves AS l SET hash = n.hash
FROM log_nodes AS n
WHERE l.tenant_id = %1$L AND n.tenant_id = %1$L AND n.level = 0 AND n.node_index = l.leaf_index
"""
DROPPED_LEVELS = f"""
DELETE FROM log_nodes WHERE tenant_id = %1$L AND (level = 0 OR mod(level, {KEPT_EVERY}) <> 0)
"""
KEPT_LEVELS = (
    f"ALTER TABLE log_nodes ADD CONSTRAINT log_nodes_kept_levels "
    f"CHECK (level > 0 AND mod(level, {KEPT_EVERY}) = 0)"
)

LEAF_HASHES_AS_NODES = """
INSERT INTO log_nodes (tenant_id, level, node_index, hash)
SELECT %1$L, 0, l.leaf_index, l.hash FROM log_leaves AS l
WHERE l.tenant_id = %1$L AND l.hash IS NOT NULL
"""
# A dropped level from the one below it: each complete pair of siblings, RFC 6962's node hash.
LEVEL_FROM_BELOW = """
INSERT INTO log_nodes (tenant_id, level, node_index, hash)
SELECT %1$L, {level}, l.node_index / 2, sha256('\\x01'::bytea || l.hash || r.hash)
FROM log_nodes AS l
JOIN log_nodes AS r
  ON r.tenant_id = %1$L AND r.level = {below} AND r.node_index = l.node_index + 1
WHERE l.tenant_id = %1$L AND l.level = {below} AND mod(l.node_index, 2) = 0
"""
# The owner reads every tenant's head (migration 0039's policy).
LEVELS = "SELECT coalesce(max(tree_size), 0) FROM log_heads"


def upgrade() -> None:
    op.execute("ALTER TABLE log_leaves ADD COLUMN hash bytea")
    body = ";;".join((LEAF_HASHES_ON_LEAVES, DROPPED_LEVELS))
    op.execute(tenant_rewrite.each_tenant(body, LOG_TABLES, update=False))
    op.execute(KEPT_LEVELS)
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    functions.create(op.get_bind(), EARLIER, FUNCTIONS)
    op.execute("ALTER TABLE log_nodes DROP CONSTRAINT log_nodes_kept_levels")
    height = int(op.get_bind().exec_driver_sql(LEVELS).scalar_one()).bit_length()
    levels = [
        LEVEL_FROM_BELOW.format(level=level, below=level - 1)
        for level in range(1, height)
        if level % KEPT_EVERY
    ]
    body = ";;".join((LEAF_HASHES_AS_NODES, *levels))
    op.execute(tenant_rewrite.each_tenant(body, LOG_TABLES, update=False))
    op.execute("ALTER TABLE log_leaves DROP COLUMN hash")
