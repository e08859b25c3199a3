"""The edges keep their ids in 16 bytes: the parent as a key, the child as uuid where it is one.

provenance_children kept each edge's parent and child as text: on a DAG whose ids are UUIDs
(36 characters) the two ids were most of an edge's row and all of its index's key, and the
edges most of what lineage stored beyond the records (718 of 2,177 MB on the 1.5M classic DAG,
bench/RESULTS-classic.md). A walk only ever looks a parent up, never prints it, so the parent
is now `parent_key`, md5 of its id as a uuid (16 bytes, one form for any id); the child is
printed, so it is `context_uuid` when its id is a UUID in the canonical form (as postings keep
them, migration 0048) and `context_id` otherwise, the other null. A read lists the child as
`coalesce(e.context_uuid::text, e.context_id)` and finds a parent's children by
`e.parent_key = key`, the key made apart (`md5(id)::uuid` in a subquery with OFFSET 0): the
cast is not leakproof, so in the probe itself row security would keep it out of the index
condition and each probe would read every edge of the tenant. Two ids of one tenant with the same
md5 would share their children in a walk: collisions can be made, but only by a writer of that
tenant, who can write any edge it likes anyway.

Each edge is rewritten once (forced row security lifted for this transaction alone); VACUUM FULL
provenance_children afterwards gives the old bytes back (README, Upgrading). The downgrade
writes each edge again from its child's parent_ids.

Revision ID: 0050
Revises: 0049
"""

from alembic import op

from lineage.db import functions, tenant_rewrite

revision = "0050"
down_revision = "0049"
branch_labels = None
depends_on = None

FUNCTIONS = ("lineage_append",)
LIFTED = ("tenants", "provenance_children")
LIFTED_DOWN = ("tenants", "provenance", "provenance_children")
UUID = "'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'"
ONE_FORM = "CHECK ((context_uuid IS NULL) <> (context_id IS NULL))"
# One tenant (%1$L) at a time: on Citus each is a router statement.
KEYED = f"""
UPDATE provenance_children AS e
SET parent_key = md5(e.parent_id)::uuid,
    context_uuid = CASE WHEN e.context_id ~ {UUID} THEN e.context_id::uuid END,
    context_id = CASE WHEN e.context_id ~ {UUID} THEN NULL ELSE e.context_id END
WHERE e.tenant_id = %1$L
"""
# The edges as the append wrote them before: one per parent of each stored record.
WRITTEN_AGAIN = """
DELETE FROM provenance_children WHERE tenant_id = %1$L;;
INSERT INTO provenance_children (tenant_id, parent_id, context_id, created_at, kind)
SELECT p.tenant_id, parent.id, p.context_id, p.created_at, p.kind
FROM provenance AS p CROSS JOIN LATERAL unnest(p.parent_ids) AS parent (id)
WHERE p.tenant_id = %1$L
"""


def upgrade() -> None:
    op.execute(
        "ALTER TABLE provenance_children ADD COLUMN parent_key uuid, "
        "ADD COLUMN context_uuid uuid, ALTER COLUMN context_id DROP NOT NULL"
    )
    op.execute(tenant_rewrite.each_tenant(KEYED, LIFTED, update=False))
    op.execute("DROP INDEX provenance_children_parent")
    op.execute("ALTER TABLE provenance_children DROP COLUMN parent_id")
    op.execute("ALTER TABLE provenance_children ALTER COLUMN parent_key SET NOT NULL")
    op.execute(f"ALTER TABLE provenance_children ADD CONSTRAINT provenance_children_id {ONE_FORM}")
    op.execute(
        "CREATE INDEX provenance_children_parent ON provenance_children (tenant_id, parent_key)"
    )
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    functions.create(op.get_bind(), "0048", FUNCTIONS)
    op.execute("DROP INDEX provenance_children_parent")
    op.execute("ALTER TABLE provenance_children DROP CONSTRAINT provenance_children_id")
    op.execute(
        "ALTER TABLE provenance_children DROP COLUMN parent_key, DROP COLUMN context_uuid, "
        "ADD COLUMN parent_id text"
    )
    op.execute(tenant_rewrite.each_tenant(WRITTEN_AGAIN, LIFTED_DOWN, update=False))
    op.execute(
        "ALTER TABLE provenance_children ALTER COLUMN parent_id SET NOT NULL, "
        "ALTER COLUMN context_id SET NOT NULL"
    )
    op.execute(
        "CREATE INDEX provenance_children_parent ON provenance_children (tenant_id, parent_id)"
    )
