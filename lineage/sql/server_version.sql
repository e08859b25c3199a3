-- name: server_version
-- Which PostgreSQL answers, for bug reports and the benchmark.
--   psql -f sql/server_version.sql
SELECT current_setting('server_version_num')::int / 10000 AS server_version_num,
       version() AS version;
