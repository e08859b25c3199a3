-- name: statistics_due
-- Whether some tenant with at least :from_records records has grown :factor-fold (or shrunk)
-- since the service last analyzed, and so which tables to analyze now (none when not due).
--   psql -v from_records=1000 -v factor=2 -f sql/statistics_due.sql
SELECT CASE WHEN lineage_statistics_due(:from_records, :factor)
            THEN lineage_statistics_tables() ELSE '{}' END AS tables;
