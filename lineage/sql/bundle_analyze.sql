-- name: bundle_analyze
-- Fresh statistics for the tables an import fills, taken inside its transaction (which counts
-- its own rows): planned on an empty database's statistics, each foreign-key check on
-- provenance was a sequential scan, so a 5,000-record import spent 11 of its 20 s on them.
ANALYZE provenance, invalidation_postings, invalidation_keys, events;
