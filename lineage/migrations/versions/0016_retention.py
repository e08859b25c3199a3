"""Retention by time: provenance and the tables that follow its rows (record_signatures,
provenance_children, root_sources) partitioned by month of the record's created_at, so that
expiring a month drops whole partitions (no row-by-row DELETE, no bloat); a global retention
period; forget tombstones kept past it; the verifiable log's tables stay whole.

A partitioned table's unique keys must hold the partition key, so a record id is unique per
month partition (a unique index on each) and across months by the append's NOT EXISTS check
(sql/append_contexts.sql). A lookup table of ids would have been the one table left to expire
row by row. Foreign keys to provenance (from record_signatures and context_text) go for the
same reason: both are written in the transaction that appends the record.

Revision ID: 0016
Revises: 0015
"""

from alembic import op

from lineage.db import PARTITIONED_0016 as PARTITIONED

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE record_signatures DROP CONSTRAINT record_signatures_tenant_id_context_id_fkey;
ALTER TABLE context_text DROP CONSTRAINT context_text_tenant_id_context_id_fkey;
-- The owner copies every tenant's rows: row security must not confine it.
ALTER TABLE provenance NO FORCE ROW LEVEL SECURITY;
ALTER TABLE record_signatures NO FORCE ROW LEVEL SECURITY;
ALTER TABLE provenance_children NO FORCE ROW LEVEL SECURITY;
ALTER TABLE root_sources NO FORCE ROW LEVEL SECURITY;
ALTER TABLE provenance RENAME TO provenance_unpartitioned;
ALTER TABLE record_signatures RENAME TO record_signatures_unpartitioned;
ALTER TABLE provenance_children RENAME TO provenance_children_unpartitioned;
ALTER TABLE root_sources RENAME TO root_sources_unpartitioned;

CREATE TABLE provenance (
    tenant_id         text        NOT NULL REFERENCES tenants,
    context_id        text        NOT NULL,
    parent_ids        text[]      NOT NULL DEFAULT '{}',
    kind              text        NOT NULL,
    source_uri        text,
    content_hash      text        NOT NULL,
    transform         text,
    transform_version text,
    produced_by       text,
    index_snapshot    text,
    trace_id          text,
    created_at        timestamptz NOT NULL,
    attributes        jsonb       NOT NULL DEFAULT '{}'
) PARTITION BY RANGE (created_at);
CREATE TABLE record_signatures (
    tenant_id  text        NOT NULL,
    context_id text        NOT NULL,
    key_id     text        NOT NULL,
    signature  bytea       NOT NULL,
    created_at timestamptz NOT NULL
) PARTITION BY RANGE (created_at);
CREATE TABLE provenance_children (
    tenant_id  text        NOT NULL,
    parent_id  text        NOT NULL,
    context_id text        NOT NULL,
    created_at timestamptz NOT NULL  -- the child's: an edge expires with the child
) PARTITION BY RANGE (created_at);
CREATE TABLE root_sources (
    tenant_id  text        NOT NULL,
    source_uri text        NOT NULL,
    kind       text        NOT NULL,
    context_id text        NOT NULL,
    depth      int         NOT NULL,
    created_at timestamptz NOT NULL
) PARTITION BY RANGE (created_at);

-- Forget tombstones outlive retention: lineage_retention_apply copies them here, with their
-- signatures, before their month is dropped (the records they name expired before them).
CREATE TABLE forget_tombstones (
    tenant_id         text        NOT NULL,
    context_id        text        NOT NULL,
    parent_ids        text[]      NOT NULL,
    kind              text        NOT NULL,
    source_uri        text,
    content_hash      text        NOT NULL,
    transform         text,
    transform_version text,
    produced_by       text,
    index_snapshot    text,
    trace_id          text,
    created_at        timestamptz NOT NULL,
    attributes        jsonb       NOT NULL,
    key_id            text,
    signature         bytea,
    PRIMARY KEY (tenant_id, context_id)
);

-- The retention period, for every tenant (partitions hold every tenant's month): a month's
-- partitions are dropped once all of it is older than keep_months. Null keeps everything.
CREATE TABLE retention_policy (
    only_row    boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
    keep_months int         CHECK (keep_months > 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO retention_policy DEFAULT VALUES;

-- Per tenant, what retention has taken: records created before expired_before are gone. Read
-- by walks that cannot see what is missing (freshness, blast radius by source).
CREATE TABLE tenant_expiry (
    tenant_id      text        PRIMARY KEY,
    expired_before timestamptz NOT NULL
);

-- Month partitions of every partitioned table from p_from's month to p_through's, those missing
-- only. Each provenance partition gets its unique index of ids; UPDATE and TRUNCATE are revoked
-- from the owner there as on the parent. The owner's, so the application role can call it on
-- the first append of a month (lineage.store.partitions).
CREATE FUNCTION lineage_add_partitions(p_from timestamptz, p_through timestamptz) RETURNS int
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    month timestamptz := date_trunc('month', p_from, 'UTC');
    parent text;
    partition text;
    added int := 0;
BEGIN
    IF p_through - p_from > interval '100 years' THEN
        RAISE EXCEPTION 'no partitions for % months', p_through - p_from;
    END IF;
    WHILE month <= p_through LOOP
        FOREACH parent IN ARRAY ARRAY['provenance', 'record_signatures', 'provenance_children',
                                      'root_sources'] LOOP
            partition := parent || '_p' || to_char(month AT TIME ZONE 'UTC', 'YYYY_MM');
            CONTINUE WHEN to_regclass('public.' || partition) IS NOT NULL;
            EXECUTE format('CREATE TABLE public.%I PARTITION OF public.%I '
                           'FOR VALUES FROM (%L) TO (%L)',
                           partition, parent, month, month + interval '1 month');
            IF parent = 'provenance' THEN
                EXECUTE format('CREATE UNIQUE INDEX %I ON public.%I (tenant_id, context_id)',
                               partition || '_id', partition);
            END IF;
            EXECUTE format('REVOKE UPDATE, TRUNCATE ON public.%I FROM PUBLIC, %I',
                           partition, current_user);
            added := added + 1;
        END LOOP;
        month := month + interval '1 month';
    END LOOP;
    RETURN added;
END
$$;

SELECT lineage_add_partitions(
    least(now(), (SELECT min(created_at) FROM provenance_unpartitioned)),
    now() + interval '2 months');
INSERT INTO provenance SELECT * FROM provenance_unpartitioned;
INSERT INTO record_signatures (tenant_id, context_id, key_id, signature, created_at)
SELECT s.tenant_id, s.context_id, s.key_id, s.signature, p.created_at
FROM record_signatures_unpartitioned AS s
JOIN provenance_unpartitioned AS p USING (tenant_id, context_id);
INSERT INTO provenance_children (tenant_id, parent_id, context_id, created_at)
SELECT e.tenant_id, e.parent_id, e.context_id, p.created_at
FROM provenance_children_unpartitioned AS e
JOIN provenance_unpartitioned AS p USING (tenant_id, context_id);
INSERT INTO root_sources (tenant_id, source_uri, kind, context_id, depth, created_at)
SELECT r.tenant_id, r.source_uri, r.kind, r.context_id, r.depth, p.created_at
FROM root_sources_unpartitioned AS r
JOIN provenance_unpartitioned AS p USING (tenant_id, context_id);
DROP TABLE provenance_unpartitioned, record_signatures_unpartitioned,
    provenance_children_unpartitioned, root_sources_unpartitioned;

-- Indexes on the parents, built on every partition (after the copy: faster than during).
CREATE INDEX provenance_parent_ids ON provenance USING gin (parent_ids)
    WITH (fastupdate = off);
CREATE INDEX provenance_source_uri ON provenance (tenant_id, source_uri, created_at)
    WHERE source_uri IS NOT NULL;
CREATE INDEX provenance_trace_id ON provenance (tenant_id, trace_id) WHERE trace_id IS NOT NULL;
CREATE INDEX provenance_transform ON provenance (tenant_id, transform, transform_version);
CREATE INDEX provenance_transform_version ON provenance (tenant_id, transform_version)
    WHERE transform_version IS NOT NULL;
CREATE INDEX provenance_index_snapshot ON provenance (tenant_id, index_snapshot, created_at)
    WHERE index_snapshot IS NOT NULL;
CREATE INDEX provenance_produced_by ON provenance (tenant_id, produced_by, created_at)
    WHERE produced_by IS NOT NULL;
CREATE INDEX provenance_created_at ON provenance (tenant_id, created_at, context_id);
CREATE INDEX provenance_content_hash ON provenance (tenant_id, content_hash, created_at);
-- The tombstones of a month, found without reading the month.
CREATE INDEX provenance_tombstones ON provenance (tenant_id) WHERE kind = 'tombstone';

ALTER TABLE record_signatures ADD PRIMARY KEY (tenant_id, context_id, created_at);
ALTER TABLE provenance_children ADD PRIMARY KEY (tenant_id, parent_id, context_id, created_at);
ALTER TABLE root_sources
    ADD PRIMARY KEY (tenant_id, source_uri, kind, context_id, created_at) INCLUDE (depth);
CREATE INDEX root_sources_context_id ON root_sources (tenant_id, context_id);

CREATE TRIGGER provenance_append_only BEFORE UPDATE OR DELETE ON provenance
    FOR EACH ROW EXECUTE FUNCTION provenance_refuse_change();
CREATE TRIGGER provenance_no_truncate BEFORE TRUNCATE ON provenance
    FOR EACH STATEMENT EXECUTE FUNCTION provenance_refuse_change();
ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_append_only;
ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_no_truncate;
CREATE TRIGGER record_signatures_append_only BEFORE UPDATE OR DELETE ON record_signatures
    FOR EACH ROW EXECUTE FUNCTION lineage_refuse_change();
ALTER TABLE record_signatures ENABLE ALWAYS TRIGGER record_signatures_append_only;

-- Expire what the retention policy says, in one transaction: for each month wholly older than
-- keep_months, copy its forget tombstones to forget_tombstones, delete the captured text of its
-- records, note each tenant's new expiry horizon, then drop the month's partitions of every
-- partitioned table. The drops are catalog changes, as quick at a billion rows as at ten; they
-- wait for the parents' lock at most lock_timeout, so appends are never queued behind a long
-- walk for longer. Partitions for the months ahead are added first. A round that drops a month
-- is audited in operator_audit; returns the receipt. The owner's, callable by the application
-- role for the service's schedule: it applies the owner's policy and cannot change it.
CREATE FUNCTION lineage_retention_apply(p_now timestamptz) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    keep int;
    cutoff timestamptz;
    added int;
    month record;
    tenant text;
    months jsonb := '[]';
    tombstones bigint := 0;
    texts bigint := 0;
    copied bigint;
    purged bigint;
    receipt jsonb;
    parent text;
BEGIN
    PERFORM set_config('lock_timeout', '5s', true);
    SET LOCAL citus.propagate_set_commands = 'local';  -- the tenant reaches Citus's workers
    added := public.lineage_add_partitions(p_now, p_now + interval '2 months');
    SELECT r.keep_months INTO keep FROM public.retention_policy AS r;
    cutoff := p_now - make_interval(months => coalesce(keep, 0));
    FOR month IN
        SELECT c.relname AS partition, substr(c.relname, length('provenance_p') + 1) AS suffix,
               b.lower, b.upper, greatest(c.reltuples, 0)::bigint AS rows_estimated
        FROM pg_inherits AS i
        JOIN pg_class AS c ON c.oid = i.inhrelid
        CROSS JOIN LATERAL (
            SELECT substring(pg_get_expr(c.relpartbound, c.oid) FROM 'FROM \\(''([^'']+)''\\)')
                       ::timestamptz AS lower,
                   substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \\(''([^'']+)''\\)')
                       ::timestamptz AS upper
        ) AS b
        WHERE i.inhparent = 'public.provenance'::regclass AND keep IS NOT NULL
          AND b.upper <= cutoff
        ORDER BY b.lower
    LOOP
        FOR tenant IN SELECT t.tenant_id FROM public.tenants AS t ORDER BY t.tenant_id LOOP
            EXECUTE format('SET LOCAL lineage.tenant_id = %L', tenant);
            EXECUTE format(
                'WITH kept AS (INSERT INTO public.forget_tombstones '
                'SELECT p.tenant_id, p.context_id, p.parent_ids, p.kind, p.source_uri, '
                'p.content_hash, p.transform, p.transform_version, p.produced_by, '
                'p.index_snapshot, p.trace_id, p.created_at, p.attributes, s.key_id, s.signature '
                'FROM public.%I AS p LEFT JOIN public.%I AS s ON s.tenant_id = p.tenant_id '
                'AND s.context_id = p.context_id '
                'WHERE p.tenant_id = $1 AND p.kind = ''tombstone'' '
                'ON CONFLICT DO NOTHING RETURNING 1) SELECT count(*) FROM kept',
                month.partition, 'record_signatures_p' || month.suffix)
                INTO copied USING tenant;
            EXECUTE format(
                'WITH gone AS (DELETE FROM public.context_text AS t USING public.%I AS p '
                'WHERE t.tenant_id = $1 AND p.tenant_id = $1 AND p.context_id = t.context_id '
                'RETURNING 1) SELECT count(*) FROM gone', month.partition)
                INTO purged USING tenant;
            INSERT INTO public.tenant_expiry AS e (tenant_id, expired_before)
            VALUES (tenant, month.upper)
            ON CONFLICT (tenant_id) DO UPDATE
                SET expired_before = greatest(e.expired_before, excluded.expired_before);
            tombstones := tombstones + copied;
            texts := texts + purged;
        END LOOP;
        months := months || jsonb_build_object(
            'month', to_char(month.lower AT TIME ZONE 'UTC', 'YYYY-MM'),
            'from', month.lower, 'to', month.upper,
            'records_estimated', month.rows_estimated);
    END LOOP;
    SET LOCAL lineage.tenant_id = '';
    FOR month IN SELECT value ->> 'month' AS name FROM jsonb_array_elements(months) LOOP
        FOREACH parent IN ARRAY ARRAY['provenance', 'record_signatures', 'provenance_children',
                                      'root_sources'] LOOP
            EXECUTE format('DROP TABLE IF EXISTS public.%I',
                           parent || '_p' || replace(month.name, '-', '_'));
        END LOOP;
    END LOOP;
    receipt := jsonb_build_object(
        'keep_months', keep, 'expired_before', CASE WHEN keep IS NOT NULL THEN cutoff END,
        'months_dropped', months, 'partitions_added', added,
        'tombstones_kept', tombstones, 'texts_purged', texts, 'applied_at', clock_timestamp());
    IF jsonb_array_length(months) > 0 THEN
        INSERT INTO public.operator_audit (action, target, detail)
        VALUES ('retention_apply', 'provenance', receipt);
    END IF;
    RETURN receipt;
END
$$;
REVOKE EXECUTE ON FUNCTION lineage_add_partitions(timestamptz, timestamptz),
    lineage_retention_apply(timestamptz) FROM PUBLIC;

-- The owner's definer function lists every tenant (row security confines the owner too).
DO $$
BEGIN
    EXECUTE format('CREATE POLICY tenants_retention ON tenants FOR SELECT TO %I USING (true)',
                   current_user);
    EXECUTE format('REVOKE UPDATE, TRUNCATE ON provenance, record_signatures '
                   'FROM PUBLIC, %I', current_user);
END
$$;
"""

POLICY = """
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
CREATE POLICY {table}_tenant ON {table}
    USING (tenant_id = lineage_session_tenant())
    WITH CHECK (tenant_id = lineage_session_tenant());
"""

GRANTS = """
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        GRANT SELECT, INSERT ON provenance, record_signatures, provenance_children, root_sources
            TO lineage_app;
        GRANT SELECT ON forget_tombstones, tenant_expiry TO lineage_app;
        GRANT EXECUTE ON FUNCTION lineage_add_partitions(timestamptz, timestamptz),
            lineage_retention_apply(timestamptz) TO lineage_app;
    END IF;
END
$$;
"""

DOWNGRADE = """
DROP POLICY tenants_retention ON tenants;
DROP FUNCTION lineage_retention_apply(timestamptz);
DROP FUNCTION lineage_add_partitions(timestamptz, timestamptz);
DROP TABLE tenant_expiry, retention_policy, forget_tombstones;
ALTER TABLE provenance NO FORCE ROW LEVEL SECURITY;
ALTER TABLE record_signatures NO FORCE ROW LEVEL SECURITY;
ALTER TABLE provenance_children NO FORCE ROW LEVEL SECURITY;
ALTER TABLE root_sources NO FORCE ROW LEVEL SECURITY;
ALTER TABLE provenance RENAME TO provenance_partitioned;
ALTER TABLE record_signatures RENAME TO record_signatures_partitioned;
ALTER TABLE provenance_children RENAME TO provenance_children_partitioned;
ALTER TABLE root_sources RENAME TO root_sources_partitioned;
ALTER INDEX provenance_parent_ids RENAME TO provenance_parent_ids_partitioned;
ALTER INDEX provenance_source_uri RENAME TO provenance_source_uri_partitioned;
ALTER INDEX provenance_trace_id RENAME TO provenance_trace_id_partitioned;
ALTER INDEX provenance_transform RENAME TO provenance_transform_partitioned;
ALTER INDEX provenance_transform_version RENAME TO provenance_transform_version_partitioned;
ALTER INDEX provenance_index_snapshot RENAME TO provenance_index_snapshot_partitioned;
ALTER INDEX provenance_produced_by RENAME TO provenance_produced_by_partitioned;
ALTER INDEX provenance_created_at RENAME TO provenance_created_at_partitioned;
ALTER INDEX provenance_content_hash RENAME TO provenance_content_hash_partitioned;
ALTER INDEX root_sources_context_id RENAME TO root_sources_context_id_partitioned;
ALTER INDEX record_signatures_pkey RENAME TO record_signatures_pkey_partitioned;
ALTER INDEX provenance_children_pkey RENAME TO provenance_children_pkey_partitioned;
ALTER INDEX root_sources_pkey RENAME TO root_sources_pkey_partitioned;

CREATE TABLE provenance (
    tenant_id         text        NOT NULL REFERENCES tenants,
    context_id        text        NOT NULL,
    parent_ids        text[]      NOT NULL DEFAULT '{}',
    kind              text        NOT NULL,
    source_uri        text,
    content_hash      text        NOT NULL,
    transform         text,
    transform_version text,
    produced_by       text,
    index_snapshot    text,
    trace_id          text,
    created_at        timestamptz NOT NULL,
    attributes        jsonb       NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, context_id)
);
INSERT INTO provenance SELECT * FROM provenance_partitioned;
CREATE TABLE record_signatures (
    tenant_id  text        NOT NULL,
    context_id text        NOT NULL,
    key_id     text        NOT NULL,
    signature  bytea       NOT NULL,
    PRIMARY KEY (tenant_id, context_id),
    FOREIGN KEY (tenant_id, context_id) REFERENCES provenance
);
INSERT INTO record_signatures SELECT tenant_id, context_id, key_id, signature
FROM record_signatures_partitioned;
CREATE TABLE provenance_children (
    tenant_id  text NOT NULL,
    parent_id  text NOT NULL,
    context_id text NOT NULL,
    PRIMARY KEY (tenant_id, parent_id, context_id)
);
INSERT INTO provenance_children SELECT tenant_id, parent_id, context_id
FROM provenance_children_partitioned;
CREATE TABLE root_sources (
    tenant_id  text NOT NULL,
    source_uri text NOT NULL,
    kind       text NOT NULL,
    context_id text NOT NULL,
    depth      int  NOT NULL,
    PRIMARY KEY (tenant_id, source_uri, kind, context_id) INCLUDE (depth)
);
INSERT INTO root_sources SELECT tenant_id, source_uri, kind, context_id, depth
FROM root_sources_partitioned;
DROP TABLE provenance_partitioned, record_signatures_partitioned,
    provenance_children_partitioned, root_sources_partitioned;
CREATE INDEX root_sources_context_id ON root_sources (tenant_id, context_id);
ALTER TABLE context_text ADD FOREIGN KEY (tenant_id, context_id) REFERENCES provenance;

CREATE INDEX provenance_parent_ids ON provenance USING gin (parent_ids)
    WITH (fastupdate = off);
CREATE INDEX provenance_source_uri ON provenance (tenant_id, source_uri, created_at)
    WHERE source_uri IS NOT NULL;
CREATE INDEX provenance_trace_id ON provenance (tenant_id, trace_id) WHERE trace_id IS NOT NULL;
CREATE INDEX provenance_transform ON provenance (tenant_id, transform, transform_version);
CREATE INDEX provenance_transform_version ON provenance (tenant_id, transform_version)
    WHERE transform_version IS NOT NULL;
CREATE INDEX provenance_index_snapshot ON provenance (tenant_id, index_snapshot, created_at)
    WHERE index_snapshot IS NOT NULL;
CREATE INDEX provenance_produced_by ON provenance (tenant_id, produced_by, created_at)
    WHERE produced_by IS NOT NULL;
CREATE INDEX provenance_created_at ON provenance (tenant_id, created_at, context_id);
CREATE INDEX provenance_content_hash ON provenance (tenant_id, content_hash, created_at);

CREATE TRIGGER provenance_append_only BEFORE UPDATE OR DELETE ON provenance
    FOR EACH ROW EXECUTE FUNCTION provenance_refuse_change();
CREATE TRIGGER provenance_no_truncate BEFORE TRUNCATE ON provenance
    FOR EACH STATEMENT EXECUTE FUNCTION provenance_refuse_change();
ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_append_only;
ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_no_truncate;
CREATE TRIGGER record_signatures_append_only BEFORE UPDATE OR DELETE ON record_signatures
    FOR EACH ROW EXECUTE FUNCTION lineage_refuse_change();
ALTER TABLE record_signatures ENABLE ALWAYS TRIGGER record_signatures_append_only;
DO $$
BEGIN
    EXECUTE format('REVOKE UPDATE, TRUNCATE ON provenance, record_signatures '
                   'FROM PUBLIC, %I', current_user);
END
$$;
"""

DOWNGRADE_GRANTS = """
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'lineage_app') THEN
        GRANT SELECT, INSERT ON provenance, record_signatures, provenance_children, root_sources
            TO lineage_app;
    END IF;
END
$$;
"""


def upgrade() -> None:
    op.execute(UPGRADE)
    for table in (*PARTITIONED, "forget_tombstones", "tenant_expiry"):
        op.execute(POLICY.format(table=table))
    op.execute(GRANTS)


def downgrade() -> None:
    op.execute(DOWNGRADE)
    for table in PARTITIONED:
        op.execute(POLICY.format(table=table))
    op.execute(DOWNGRADE_GRANTS)
