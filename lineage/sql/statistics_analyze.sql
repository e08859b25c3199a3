-- name: statistics_analyze
-- ANALYZE one of the tables statistics_due names, as its owner; false when a lock conflicted,
-- at once (it never waits in the lock queue).
--   psql -v table_name=provenance -f sql/statistics_analyze.sql
SELECT lineage_analyze(:'table_name') AS analyzed;
