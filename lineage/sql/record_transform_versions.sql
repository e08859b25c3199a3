-- name: record_transform_versions
-- Notes each transform version the first time it is seen, with its PEP 440 sort key.
-- Counted through RETURNING: Citus runs an INSERT ... SELECT without one as a COPY,
-- which row-level security refuses.
WITH inserted AS (
    INSERT INTO transform_versions (tenant_id, transform, transform_version, version_key, first_seen)
    SELECT DISTINCT ON (v.transform_version)
           :'tenant_id', split_part(v.transform_version, '@', 1), v.transform_version, v.version_key,
           v.first_seen
    FROM unnest(:'transform_versions'::text[], :'version_keys'::text[], :'first_seens'::timestamptz[])
         AS v(transform_version, version_key, first_seen)
    ORDER BY v.transform_version, v.first_seen
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT count(*) AS inserted FROM inserted;
