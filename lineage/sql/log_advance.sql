-- name: log_advance
-- One step of the tenant's verifiable log, through the owner's lineage_log_advance, by the
-- holder of its head's lock (sql/log_lock_head.sql): the oldest queued records, in queue order,
-- become leaves from old_size on, with the tree nodes they complete and the new root hash, and
-- leave the queue. Returns the new tree size.
SELECT lineage_log_advance(
    :'tenant_id', :'tenant_token', :old_size, :'context_ids'::text[],
    :'created_ats'::timestamptz[], :'levels'::smallint[], :'node_indexes'::bigint[],
    :'hashes'::bytea[], :'root_hash') AS tree_size;
