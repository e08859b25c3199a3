-- name: append_contexts
-- Appends records given as parallel arrays (one element per record; parent_ids as array
-- literals). Ids that already exist are left alone and not returned: the caller compares them.
-- provenance is partitioned by created_at, so an id is unique by the unique index of its
-- partition (ON CONFLICT: a concurrent append of the same id) and by the check of every other
-- partition (one probe of each partition's id index per id; sql/ids_stored_twice.sql after it,
-- needed only where one_partition is false: one partition over all time is unique by its index,
-- and no partition can join it while this insert holds provenance).
-- The same statement notes each new record's parent edges (provenance_children, for descendant
-- walks, with the child's kind) and queues it for the tenant's verifiable log, so no trigger is needed (Citus runs none
-- on a distributed table) and a record is never stored without them.
WITH inserted AS (
    INSERT INTO provenance (tenant_id, context_id, parent_ids, kind, source_uri, content_hash,
                            transform, transform_version, produced_by, index_snapshot, trace_id,
                            created_at, attributes)
    SELECT :'tenant_id', r.context_id, r.parent_ids::text[], r.kind, r.source_uri,
           r.content_hash, r.transform, r.transform_version, r.produced_by, r.index_snapshot,
           r.trace_id, r.created_at, r.attributes::jsonb
    FROM unnest(:'context_ids'::text[], :'parent_id_lists'::text[], :'kinds'::text[],
                :'source_uris'::text[], :'content_hashes'::text[], :'transforms'::text[],
                :'transform_versions'::text[], :'produced_bys'::text[],
                :'index_snapshots'::text[], :'trace_ids'::text[], :'created_ats'::timestamptz[],
                :'attribute_docs'::text[])
         AS r(context_id, parent_ids, kind, source_uri, content_hash, transform,
              transform_version, produced_by, index_snapshot, trace_id, created_at, attributes)
    -- Uncorrelated, so that Citus runs it as one router query before the insert.
    WHERE r.context_id <> ALL (ARRAY(
        SELECT stored.context_id FROM provenance AS stored
        WHERE stored.tenant_id = :'tenant_id'
          AND stored.context_id = ANY (:'context_ids'::text[])))
    ON CONFLICT DO NOTHING
    RETURNING context_id, parent_ids, created_at, kind
),
edges AS (
    INSERT INTO provenance_children (tenant_id, parent_id, context_id, created_at, kind)
    SELECT DISTINCT :'tenant_id', parent.id, i.context_id, i.created_at, i.kind
    FROM inserted AS i CROSS JOIN LATERAL unnest(i.parent_ids) AS parent (id)
    RETURNING context_id
),
queued AS (
    INSERT INTO log_queue (tenant_id, context_id)
    SELECT :'tenant_id', i.context_id FROM inserted AS i
    RETURNING queued_id
)
SELECT i.context_id,
       NOT EXISTS (SELECT 1 FROM pg_inherits AS h JOIN pg_class AS c ON c.oid = h.inhrelid
                   WHERE h.inhparent = 'provenance'::regclass
                     AND pg_get_expr(c.relpartbound, c.oid)
                         <> 'FOR VALUES FROM (MINVALUE) TO (MAXVALUE)') AS one_partition
FROM inserted AS i;
