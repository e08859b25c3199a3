-- Trigger: the append-only tables other than provenance refuse UPDATE and DELETE, except the
-- deletion of a tenant lineage_delete_tenant is running (tenant_deleting names it).
CREATE OR REPLACE FUNCTION public.lineage_refuse_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- to_jsonb: a table without tenant_id (operator_audit) is never deleted from.
    IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM tenant_deleting AS d
                                    WHERE d.tenant_id = to_jsonb(OLD) ->> 'tenant_id') THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '% is append-only: % is refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$function$;
