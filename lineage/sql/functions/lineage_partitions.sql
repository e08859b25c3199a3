-- Each partition of p_parent with its name's suffix after the parent's and its bounds
-- (MINVALUE and MAXVALUE as -infinity and infinity), oldest first.
CREATE OR REPLACE FUNCTION public.lineage_partitions(p_parent regclass)
 RETURNS TABLE(partition text, suffix text, lower timestamp with time zone, upper timestamp with time zone)
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog', 'pg_temp'
AS $function$
    SELECT c.relname::text, substr(c.relname, length(p.relname) + 1),
           CASE b.bound[1] WHEN 'MINVALUE' THEN '-infinity'
                ELSE btrim(b.bound[1], '''') END::timestamptz,
           CASE b.bound[2] WHEN 'MAXVALUE' THEN 'infinity'
                ELSE btrim(b.bound[2], '''') END::timestamptz
    FROM pg_inherits AS i
    JOIN pg_class AS c ON c.oid = i.inhrelid
    JOIN pg_class AS p ON p.oid = i.inhparent
    CROSS JOIN LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                    'FROM \((.+)\) TO \((.+)\)') AS b (bound)
    WHERE i.inhparent = p_parent
    ORDER BY 3
$function$;
REVOKE ALL ON FUNCTION public.lineage_partitions(p_parent regclass) FROM PUBLIC;
