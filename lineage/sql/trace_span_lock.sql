-- name: trace_span_lock
-- Takes each given trace's span-append lock for the rest of the transaction (in trace id
-- order, so two appends never deadlock): appends that count a trace's spans after taking it
-- cannot together pass the per-trace limit. The lock's key hashes the tenant's token with the
-- trace id, so no other tenant's session (which knows neither the token nor how to make it)
-- can take it and hold the tenant's spans out.
--   psql -v tenant_id=default -v 'trace_ids={4bf92f3577b34da6a3ce929d0e0e4736}' \
--        -f sql/trace_span_lock.sql
SELECT count(pg_advisory_xact_lock(hashtextextended(
           coalesce(current_setting('lineage.tenant_token', true), '') || '/' || :'tenant_id' || '/'
           || t.trace_id, 0)))
       AS locked
FROM (SELECT DISTINCT unnest(:'trace_ids'::text[]) AS trace_id ORDER BY 1) AS t;
