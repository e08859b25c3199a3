"""The append takes its postings grouped and its keys by position: lineage_append's arguments
change, so the old function is dropped (on Citus the new one is distributed by its tenant).

lineage.services.appends already carries each record's postings and root sources down the
batch; it now also groups them a row per key, kind, depth and month, finds each id's form
(uuid or text) and lists the batch's keys once, each record's keys as positions among them.
lineage_append spent over a third of its time regrouping those postings (a sort of every
record's keys, an ordered aggregate per group), matching each id against the UUID pattern and
mapping key names to numbers through a JSON object. It now numbers the batch's keys once and
inserts the rows as given, and checks that each id marked as a UUID prints back as itself.
Nothing is rewritten: only the function changes.

Revision ID: 0055
Revises: 0054
"""

from alembic import op

from lineage.db import functions, tenant_rewrite

revision = "0055"
down_revision = "0054"
branch_labels = None
depends_on = None

FUNCTIONS = ("lineage_append",)
APPEND_0036 = (
    "lineage_append(text, text, text[], text[], text[], text[], text[], text[], text[], "
    "text[], text[], text[], text[], timestamptz[], text[], text[], bytea[], text[], "
    "text[], text[], text[])"
)
APPEND_0055 = (
    "lineage_append(text, text, text[], boolean[], text[], text[], text[], text[], text[], "
    "text[], text[], text[], text[], text[], timestamptz[], text[], text[], bytea[], text[], "
    "text[], text[], text[], text[], integer[], text[], integer[], timestamptz[], text[], "
    "text[])"
)
DELEGATE = (
    "SELECT create_distributed_function('{function}'::regprocedure, 'p_tenant', "
    "colocate_with := 'tenants', force_delegation := true)"
)


def upgrade() -> None:
    _replace(APPEND_0036, revision, APPEND_0055)


def downgrade() -> None:
    _replace(APPEND_0055, "0053", APPEND_0036)


def _replace(old: str, loaded_by: str, new: str) -> None:
    op.execute(f"DROP FUNCTION {old}")
    functions.create(op.get_bind(), loaded_by, FUNCTIONS)
    if tenant_rewrite.placed():
        op.execute(DELEGATE.format(function=new))
