"""Records by content hash through a hash index: the lookup (sql/newest_by_content_hash.sql)
compares whole hashes, so the index keeps a 4-byte code a record instead of the 71-character
text with the tenant and the time.

The b-tree of (tenant_id, content_hash, created_at) was the largest index on the records, 157
bytes stored and 228 bytes of WAL a record appended (bench/RESULTS-write-bytes.md), for one
query that asks for whole hashes only. A hash index answers the same equality; the tenant and
the kinds are checked on the few records it finds, and the newest of them is taken by a sort of
those few. Its condition is text equality, leakproof, so row security lets the probe run as an
index condition (tests/test_content_hash_lookup.py).

Revision ID: 0040
Revises: 0039
"""

from alembic import op

revision = "0040"
down_revision = "0039"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP INDEX provenance_content_hash")
    op.execute("CREATE INDEX provenance_content_hash ON provenance USING hash (content_hash)")


def downgrade() -> None:
    op.execute("DROP INDEX provenance_content_hash")
    op.execute(
        "CREATE INDEX provenance_content_hash ON provenance (tenant_id, content_hash, created_at)"
    )
