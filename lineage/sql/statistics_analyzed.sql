-- name: statistics_analyzed
-- Remember each tenant's record count as the statistics just taken know it.
--   psql -f sql/statistics_analyzed.sql
SELECT lineage_statistics_analyzed();
