-- name: partitions_add
-- Adds the month partitions of provenance and the tables that follow its rows, from the month
-- of :from_time to that of :through, those missing only; returns how many tables it made.
--   psql -v from_time=2026-12-01T00:00:00Z -v through=2027-02-01T00:00:00Z \
--        -f sql/partitions_add.sql
SELECT lineage_add_partitions(:'from_time'::timestamptz, :'through'::timestamptz) AS added;
