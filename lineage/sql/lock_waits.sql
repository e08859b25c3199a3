-- name: lock_waits
-- The backends of one application (a lineage command names its connections so) that wait for
-- a lock: which lock on what, and each backend holding it up, with what that one is doing as
-- far as the current role may see (pg_stat_activity hides another role's state and query).
-- The command line reports them on stderr while a command waits (lineage.cli.waits), as the
-- URL's user: the application role may not read pg_stat_activity.
--   psql -v application_name='lineage retention set [4242]' -f sql/lock_waits.sql
SELECT w.pid, l.mode, coalesce(l.relation::regclass::text, l.locktype) AS target,
       extract(epoch FROM now() - w.query_start)::int AS waited_s,
       b.pid AS holder_pid, b.application_name AS holder_application, b.state AS holder_state,
       extract(epoch FROM now() - coalesce(b.xact_start, b.query_start))::int AS holder_for_s,
       left(regexp_replace(b.query, '\s+', ' ', 'g'), 100) AS holder_query
FROM pg_stat_activity AS w
JOIN pg_locks AS l ON l.pid = w.pid AND NOT l.granted
CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS blocking (pid)
LEFT JOIN pg_stat_activity AS b ON b.pid = blocking.pid
WHERE w.application_name = :'application_name'
ORDER BY w.pid, b.pid;
