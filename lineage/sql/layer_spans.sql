-- name: layer_spans
-- The spans of these traces (an array literal such as '{4bf9...}'), at most max_spans of each,
-- earliest first: what the request, service and transport layers of their records are read from.
-- Only the spans a layer reads bring their attributes: the records' own (span_ids), the
-- transports (CLIENT) and the entry spans (SERVER, or with no stored parent).
--   psql -v tenant_id=default -v trace_ids='{4bf92f3577b34da6a3ce929d0e0e4736}' \
--        -v span_ids='{00f067aa0ba902b7}' -v max_spans=1000 -f sql/layer_spans.sql
SELECT s.trace_id, s.span_id, s.parent_span_id, s.name, s.span_kind, s.service_name,
       s.start_time, s.end_time,
       CASE WHEN s.span_kind IN ('CLIENT', 'SERVER') OR p.span_id IS NULL
                 OR s.span_id = ANY (:'span_ids'::text[])
            THEN s.attributes END AS attributes
FROM (
    SELECT t.*, row_number() OVER (PARTITION BY t.trace_id ORDER BY t.start_time, t.span_id) AS nth
    FROM spans AS t
    WHERE t.tenant_id = :'tenant_id' AND t.trace_id = ANY (:'trace_ids'::text[])
) AS s
LEFT JOIN spans AS p
    ON p.tenant_id = :'tenant_id' AND p.trace_id = s.trace_id AND p.span_id = s.parent_span_id
WHERE s.nth <= :max_spans
ORDER BY s.trace_id, s.start_time, s.span_id;
