-- name: audit_append
-- One audit record: who (key id) did what (action) to what (target), when (at; null means
-- now). Its id is the tenant's next audit id: the tenant's counter row is locked until the
-- transaction ends, so ids are dense per tenant and say nothing of other tenants. Append-only.
-- RETURNING: on Citus an INSERT ... SELECT without it runs as a COPY, refused by row security.
-- Tables are named with their schema, as lineage_audit_append runs it for lineage_walk_back.
--   psql -v tenant_id=default -v key_id=k1 -v action=walk -v target=answer_1 -v detail='{}' \
--        -v at=now -f sql/audit_append.sql
WITH counter AS (
    INSERT INTO public.tenant_counters AS c (tenant_id, counter, last_value)
    VALUES (:'tenant_id', 'audit', 1)
    ON CONFLICT (tenant_id, counter) DO UPDATE SET last_value = c.last_value + 1
    RETURNING c.last_value
)
INSERT INTO public.audit_log (tenant_id, audit_id, at, key_id, action, target, detail)
SELECT :'tenant_id', counter.last_value, coalesce(:'at'::timestamptz, clock_timestamp()),
       nullif(:'key_id', ''), :'action', nullif(:'target', ''), :'detail'::jsonb
FROM counter
RETURNING audit_id
