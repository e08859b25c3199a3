-- name: trace_spans
-- The spans of one trace, earliest first, at most max_spans of them: the trace's span tree
-- (parent_span_id links a span to its parent) beside its records.
--   psql -v tenant_id=default -v trace_id=4bf92f3577b34da6a3ce929d0e0e4736 -v max_spans=1000 \
--        -f sql/trace_spans.sql
SELECT s.span_id, s.parent_span_id, s.name, s.span_kind, s.service_name, s.start_time,
       s.end_time, s.status_code, s.status_message, s.attributes
FROM spans AS s
WHERE s.tenant_id = :'tenant_id' AND s.trace_id = :'trace_id'
ORDER BY s.start_time, s.span_id
LIMIT :max_spans;
