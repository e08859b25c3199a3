-- name: events_append
-- Numbers a tenant's newly appended records for the live event stream (GET /v1/events), in
-- the order given, after the tenant's last position; returns the last position given. It locks
-- the tenant's events counter until the transaction ends, so positions commit in their order
-- and a reader that sees one sees every smaller one: run it last in the appending transaction.
--   psql -v tenant_id=default -v context_ids='{ctx_a,ctx_b}' -f sql/events_append.sql
WITH counter AS (
    INSERT INTO tenant_counters AS c (tenant_id, counter, last_value)
    VALUES (:'tenant_id', 'events', cardinality(:'context_ids'::text[]))
    ON CONFLICT (tenant_id, counter)
        DO UPDATE SET last_value = c.last_value + cardinality(:'context_ids'::text[])
    RETURNING c.last_value
), numbered AS (
    INSERT INTO events (tenant_id, position, context_id)
    SELECT :'tenant_id', counter.last_value - cardinality(:'context_ids'::text[]) + appended.ordinal,
           appended.context_id
    FROM counter, unnest(:'context_ids'::text[]) WITH ORDINALITY AS appended (context_id, ordinal)
    RETURNING position
)
SELECT max(position) AS last_position FROM numbered;
