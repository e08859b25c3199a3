"""Month partitions only while a retention period is set.

An id names no month, so a lookup by id, the append's parent check and every step of a walk
probe each partition of provenance: with a month partition each, those grew with the months
kept (bench/RESULTS-retention.md). Without a period nothing expires, so the tables that are
partitioned (provenance and the tables that follow its rows) now hold one open partition each,
`<table>_p_open`, from MINVALUE to MAXVALUE: a read costs what it cost unpartitioned, and the id
index of that one partition keeps every id unique.

Setting a period (lineage_partitions_shape, run by `lineage retention set`) closes the open
partition at the start of next month, as `<table>_p_until_YYYY_MM` (dropped whole once that
month is past the period), or drops it when it is empty, and adds month partitions from there;
clearing the period opens a partition after the last month. Partitions are found by their
bounds (lineage_partitions), never by their names.

Revision ID: 0019
Revises: 0018
"""

from alembic import op

from lineage.db import PARTITIONED_0016 as PARTITIONED
from lineage.db import functions

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


# Loaded from lineage/sql/functions/, in this order: the helpers before their callers.
FUNCTIONS = (
    "lineage_partitions",
    "lineage_create_partition",
    "lineage_add_partitions",
    "lineage_partitions_shape",
    "lineage_retention_apply",
)

PARTITIONED_SQL = ", ".join(f"'{table}'" for table in PARTITIONED)

# Every row moves into one open partition per table when no period is set (the owner copies
# every tenant's rows: row security must not confine it).
MERGE = """
DO $$
DECLARE
    parent text;
    old record;
BEGIN
    IF (SELECT keep_months FROM retention_policy) IS NOT NULL THEN
        RETURN;
    END IF;
    FOREACH parent IN ARRAY ARRAY[{partitioned}] LOOP
        EXECUTE format('ALTER TABLE %I NO FORCE ROW LEVEL SECURITY', parent);
        FOR old IN SELECT p.partition FROM lineage_partitions(parent::regclass) AS p LOOP
            EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', parent, old.partition);
            EXECUTE format('ALTER TABLE %I RENAME TO %I', old.partition, old.partition || '_old');
        END LOOP;
        PERFORM lineage_create_partition(parent, parent || '_p_open', '-infinity', 'infinity');
        FOR old IN SELECT c.relname FROM pg_class AS c
                   WHERE c.relname LIKE parent || '\\_p%\\_old' AND c.relkind = 'r'
                     AND c.relnamespace = 'public'::regnamespace LOOP
            EXECUTE format('INSERT INTO %I SELECT * FROM %I', parent, old.relname);
            EXECUTE format('DROP TABLE %I', old.relname);
        END LOOP;
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', parent);
    END LOOP;
END
$$;
"""

# Back to month partitions from the oldest record's month to two months ahead (0017's layout),
# the open partition's rows copied into them.
DOWNGRADE = """
DO $$
DECLARE
    parent text;
    open text;
    oldest timestamptz := (SELECT min(created_at) FROM provenance);
BEGIN
    FOREACH parent IN ARRAY ARRAY[{partitioned}] LOOP
        EXECUTE format('ALTER TABLE %I NO FORCE ROW LEVEL SECURITY', parent);
        SELECT p.partition INTO open FROM lineage_partitions(parent::regclass) AS p
        WHERE p.upper = 'infinity';
        IF open IS NOT NULL THEN
            EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', parent, open);
            EXECUTE format('ALTER TABLE %I RENAME TO %I', open, parent || '_open_old');
        END IF;
    END LOOP;
    PERFORM lineage_add_partitions(least(now(), oldest), now() + interval '2 months');
    FOREACH parent IN ARRAY ARRAY[{partitioned}] LOOP
        IF to_regclass(parent || '_open_old') IS NOT NULL THEN
            EXECUTE format('INSERT INTO %I SELECT * FROM %I', parent, parent || '_open_old');
            EXECUTE format('DROP TABLE %I', parent || '_open_old');
        END IF;
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', parent);
    END LOOP;
END
$$;
"""


def upgrade() -> None:
    functions.create(op.get_bind(), revision, FUNCTIONS)
    op.execute(MERGE.format(partitioned=PARTITIONED_SQL))


def downgrade() -> None:
    op.execute(DOWNGRADE.format(partitioned=PARTITIONED_SQL))
    functions.create(op.get_bind(), "0018", ("lineage_add_partitions", "lineage_retention_apply"))
    op.execute(
        "DROP FUNCTION lineage_partitions_shape(timestamptz);"
        "DROP FUNCTION lineage_create_partition(text, text, timestamptz, timestamptz);"
        "DROP FUNCTION lineage_partitions(regclass);"
    )
