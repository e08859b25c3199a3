-- name: log_dequeue
-- Drop queue entries once their records have leaves.
DELETE FROM log_queue
WHERE tenant_id = :'tenant_id' AND queued_id = ANY (:'queued_ids'::bigint[]);
