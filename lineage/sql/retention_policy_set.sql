-- name: retention_policy_set
-- Sets the retention period for every tenant: records are kept at least :keep_months months
-- (0 keeps everything); audited in operator_audit. The owner's: the service cannot change it.
--   psql -v keep_months=12 -f sql/retention_policy_set.sql
WITH changed AS (
    UPDATE retention_policy
    SET keep_months = nullif(:'keep_months'::int, 0), updated_at = now()
    RETURNING keep_months
), audited AS (
    INSERT INTO operator_audit (action, target, detail)
    SELECT 'retention_set', 'provenance', jsonb_build_object('keep_months', c.keep_months)
    FROM changed AS c
    RETURNING 1
)
SELECT c.keep_months FROM changed AS c, audited;
