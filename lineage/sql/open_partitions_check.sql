-- name: open_partitions_check
-- Drops the check an interrupted `lineage retention set` left on the open partitions and, with
-- :add, adds the one of the bound closing them at next month is to give them, NOT VALID
-- (lineage_open_partitions_check, migration 0024); a transaction of its own.
--   psql -v now=2026-12-01T00:00:00Z -v add=true -f sql/open_partitions_check.sql
SELECT lineage_open_partitions_check(:'now'::timestamptz, :'add'::boolean) AS changed;
