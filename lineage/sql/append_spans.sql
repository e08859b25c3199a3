-- name: append_spans
-- Stores finished spans given as parallel arrays (one element per span). A span already stored
-- (same trace and span id) is left alone: exporters may send a span twice.
INSERT INTO spans (tenant_id, trace_id, span_id, parent_span_id, name, span_kind, service_name,
                   start_time, end_time, status_code, status_message, attributes)
SELECT :'tenant_id', s.trace_id, s.span_id, s.parent_span_id, s.name, s.span_kind,
       s.service_name, s.start_time, s.end_time, s.status_code, s.status_message,
       s.attributes::jsonb
FROM unnest(:'span_trace_ids'::text[], :'span_ids'::text[], :'parent_span_ids'::text[],
            :'span_names'::text[], :'span_kinds'::text[], :'service_names'::text[],
            :'start_times'::timestamptz[], :'end_times'::timestamptz[],
            :'status_codes'::text[], :'status_messages'::text[], :'attribute_docs'::text[])
     AS s(trace_id, span_id, parent_span_id, name, span_kind, service_name, start_time,
          end_time, status_code, status_message, attributes)
ON CONFLICT (tenant_id, trace_id, span_id) DO NOTHING
RETURNING span_id;
