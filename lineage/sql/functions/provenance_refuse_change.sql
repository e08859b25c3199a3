-- Trigger: provenance is append-only, UPDATE and DELETE refused, except the deletion of a
-- tenant lineage_delete_tenant is running (tenant_deleting names it). Kept on plain PostgreSQL,
-- where it stops a superuser too; Citus keeps no trigger on a distributed table.
CREATE OR REPLACE FUNCTION public.provenance_refuse_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF TG_OP = 'DELETE'
       AND EXISTS (SELECT 1 FROM tenant_deleting AS d WHERE d.tenant_id = OLD.tenant_id) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'provenance is append-only: % is refused', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'record what changed as a new record derived from the old one';
END
$function$;
