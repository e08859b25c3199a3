"""Revoking a key and deleting a tenant notify lineage_keys with no payload: any role may LISTEN
on a channel, and the application role (what an SQL injection gets) read every revoked key's
id and every deleted tenant's name there. The key caches empty themselves whatever the payload.
(The event stream's notifications name their tenant by a hash of its token from this version
on: lineage.services.events.stream_tag.)

Revision ID: 0031
Revises: 0030
"""

from alembic import op

from lineage.db import functions

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

FUNCTIONS = ("lineage_key_revoke", "lineage_delete_tenant")


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)


def downgrade() -> None:
    functions.create(op.get_bind(), "0025", FUNCTIONS)
