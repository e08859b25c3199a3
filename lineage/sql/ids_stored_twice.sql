-- name: ids_stored_twice
-- Which of these ids the tenant has stored more than once. Each partition's id index keeps an
-- id unique within it; two appends of one id into two month partitions, each unseen by the
-- other, are found here after the events counter's lock (sql/events_append.sql): whichever
-- commits second sees the first. Not run where provenance is one partition over all time
-- (append_contexts' one_partition): its id index alone keeps an id unique.
--   psql -v tenant_id=default -v context_ids='{ctx_a}' -f sql/ids_stored_twice.sql
SELECT p.context_id
FROM provenance AS p
WHERE p.tenant_id = :'tenant_id' AND p.context_id = ANY (:'context_ids'::text[])
GROUP BY p.context_id
HAVING count(*) > 1;
