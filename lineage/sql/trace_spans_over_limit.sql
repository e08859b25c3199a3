-- name: trace_spans_over_limit
-- Those of the given traces that hold more than max_spans spans, with how many they hold.
--   psql -v tenant_id=default -v 'trace_ids={4bf92f3577b34da6a3ce929d0e0e4736}' \
--        -v max_spans=10000 -f sql/trace_spans_over_limit.sql
SELECT s.trace_id, count(*) AS stored
FROM spans AS s
WHERE s.tenant_id = :'tenant_id' AND s.trace_id = ANY (:'trace_ids'::text[])
GROUP BY s.trace_id
HAVING count(*) > :max_spans
ORDER BY s.trace_id;
