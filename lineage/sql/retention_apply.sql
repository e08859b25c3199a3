-- name: retention_apply
-- Expires what the retention policy says (lineage_retention_apply, migration 0016): drops the
-- month partitions of provenance and the tables that follow its rows once the whole month is
-- older than keep_months, after keeping their forget tombstones and purging their captured
-- text; adds the months ahead. Returns the receipt it wrote to operator_audit.
--   psql -v now=2027-06-01T00:00:00Z -f sql/retention_apply.sql
SELECT lineage_retention_apply(:'now'::timestamptz) AS receipt;
