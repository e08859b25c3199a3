-- name: open_partitions_validate
-- Validates the open partitions' checks (lineage_open_partitions_validate, migration 0024):
-- reads their rows while appends go on; a transaction of its own, before partitions_shape.
--   psql -f sql/open_partitions_validate.sql
SELECT lineage_open_partitions_validate() AS validated;
