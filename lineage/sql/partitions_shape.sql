-- name: partitions_shape
-- Fits the partitions of provenance and the tables that follow its rows to the retention
-- period (lineage_partitions_shape, migration 0018): with a period, the open partition is
-- closed at the start of next month (or dropped when empty) and month partitions follow; with
-- none, one open partition after the last month. Returns what it did.
--   psql -v now=2026-12-01T00:00:00Z -f sql/partitions_shape.sql
SELECT lineage_partitions_shape(:'now'::timestamptz) AS shape;
