-- Every row of one tenant, in every table of this schema with a tenant_id column (found in the
-- catalog, so a table added later is covered), referencing tables before the ones they
-- reference, in one transaction; then a receipt in operator_audit: the rows deleted per table,
-- the tenant's last signed checkpoint (what a holder of its proofs can still check against),
-- the time. Returns the receipt. The owner's alone: the application role may not run it.
-- lineage_keys is notified (at commit), with no payload (any role may LISTEN there): every
-- server process's key cache, which may hold the tenant's keys, is emptied.
CREATE OR REPLACE FUNCTION public.lineage_delete_tenant(p_tenant_id text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
DECLARE
    remaining regclass[];
    chosen regclass;
    deleted bigint;
    counts jsonb := '{}';
    last_checkpoint jsonb;
    receipt jsonb;
BEGIN
    PERFORM set_config('lineage.tenant_id', p_tenant_id, true);
    IF NOT EXISTS (SELECT 1 FROM tenants WHERE tenant_id = p_tenant_id) THEN
        RAISE EXCEPTION 'no tenant %', p_tenant_id USING ERRCODE = 'no_data_found';
    END IF;
    SELECT jsonb_build_object('tree_size', c.tree_size,
                              'root_hash', encode(c.root_hash, 'base64'),
                              'signed_at', c.signed_at, 'note', c.note)
    INTO last_checkpoint
    FROM log_checkpoints AS c WHERE c.tenant_id = p_tenant_id
    ORDER BY c.tree_size DESC LIMIT 1;
    INSERT INTO tenant_deleting (tenant_id) VALUES (p_tenant_id);
    remaining := ARRAY(
        SELECT c.oid::regclass
        FROM pg_class AS c
        JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attname = 'tenant_id'
                              AND NOT a.attisdropped
        WHERE c.relnamespace = to_regnamespace(current_schema())
          AND c.relkind IN ('r', 'p') AND NOT c.relispartition
          AND c.oid <> 'tenant_deleting'::regclass
    );
    WHILE cardinality(remaining) > 0 LOOP
        SELECT t INTO chosen
        FROM unnest(remaining) AS t
        WHERE NOT EXISTS (SELECT 1 FROM pg_constraint AS f
                          WHERE f.contype = 'f' AND f.confrelid = t AND f.conrelid <> t
                            AND f.conrelid = ANY (remaining))
        ORDER BY t::text LIMIT 1;
        IF chosen IS NULL THEN
            RAISE EXCEPTION 'the foreign keys among % form a cycle', remaining;
        END IF;
        EXECUTE format('DELETE FROM %s WHERE tenant_id = $1', chosen) USING p_tenant_id;
        GET DIAGNOSTICS deleted = ROW_COUNT;
        counts := counts || jsonb_build_object(chosen::text, deleted);
        remaining := array_remove(remaining, chosen);
    END LOOP;
    DELETE FROM tenant_deleting WHERE tenant_id = p_tenant_id;
    receipt := jsonb_build_object('tenant_id', p_tenant_id, 'rows', counts,
                                  'last_checkpoint', last_checkpoint,
                                  'deleted_at', clock_timestamp());
    INSERT INTO operator_audit (action, target, detail)
    VALUES ('tenant_delete', p_tenant_id, receipt);
    PERFORM pg_notify('lineage_keys', '');
    RETURN receipt;
END
$function$;
REVOKE ALL ON FUNCTION public.lineage_delete_tenant(p_tenant_id text) FROM PUBLIC;
