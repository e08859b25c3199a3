"""No function the application role plants is called with the owner's rights. Where `public`
is writable (PostgreSQL 14 and older, and clusters upgraded from them), lineage_app could
create `public.unnest(text[])`, a better match than pg_catalog's `unnest(anyarray)`, and a
SECURITY DEFINER function resolving names through public would run it as the owner."""

import asyncpg
import pytest

from lineage import db

# Each a closer match than pg_catalog's for some argument types, or the same signature.
PLANTED = (
    ("unnest", "p text[]", "SETOF text"),
    ("unnest", "p regclass[]", "SETOF regclass"),
    ("convert_to", "p text, q text", "bytea"),
    ("encode", "p bytea, q text", "text"),
    ("sha256", "p bytea", "bytea"),
    ("current_setting", "p text", "text"),
    ("current_setting", "p text, q boolean", "text"),
    ("now", "", "timestamptz"),
    ("clock_timestamp", "", "timestamptz"),
    ("nullif", "p text, q text", "text"),
    ("lower", "p text", "text"),
    ("cardinality", "p text[]", "integer"),
    ("jsonb_build_object", "p text, q text", "jsonb"),
    ("jsonb_build_object", "p text, q bigint", "jsonb"),
    ("set_config", "p text, q text, r boolean", "text"),
    ("textcat", "p text, q text", "text"),
)
SAMPLE_ARGUMENTS = {
    "text": "'acme'",
    "bytea": "'\\x00'::bytea",
    "text[]": "'{a}'::text[]",
    "timestamp with time zone": "'2026-12-01T00:00:00Z'::timestamptz",
    "timestamp with time zone[]": "'{2026-12-01T00:00:00Z}'::timestamptz[]",
    "bytea[]": "'{}'::bytea[]",
    "integer[]": "'{0}'::integer[]",
    "smallint[]": "'{}'::smallint[]",
    "bigint": "0",
    "double precision": "2",
    "bigint[]": "'{}'::bigint[]",
    "boolean[]": "'{}'::boolean[]",
    "integer": "20",
    "jsonb": "'{}'::jsonb",
}


@pytest.fixture
async def planted(owner: asyncpg.Connection) -> None:
    """Traps in public, made by lineage_app after it is given CREATE there (the old default)."""
    await owner.execute("GRANT CREATE ON SCHEMA public TO lineage_app")
    await owner.execute("SET ROLE lineage_app")
    for name, parameters, returns in PLANTED:
        body = "RAISE EXCEPTION 'planted % called as %', $n$" + name + "$n$, current_user;"
        await owner.execute(
            f"CREATE FUNCTION public.{name}({parameters}) RETURNS {returns} "
            f"LANGUAGE plpgsql AS $f$ BEGIN {body} END $f$"
        )
    await owner.execute(
        "CREATE FUNCTION public.planted_eq(text, text) RETURNS boolean LANGUAGE plpgsql AS "
        "$f$ BEGIN RAISE EXCEPTION 'planted = called as %', current_user; END $f$"
    )
    await owner.execute(
        "CREATE OPERATOR public.= (leftarg = text, rightarg = text, function = public.planted_eq)"
    )
    await owner.execute("RESET ROLE")


async def test_the_migrations_revoke_create_on_public(owner: asyncpg.Connection) -> None:
    for role in ("lineage_app", "public"):
        assert not await owner.fetchval(
            "SELECT has_schema_privilege($1, 'public', 'CREATE')", role
        ), role


async def test_no_definer_function_calls_a_planted_function(
    owner: asyncpg.Connection, pool: asyncpg.Pool, planted: None
) -> None:
    definers = await owner.fetch(
        "SELECT p.oid::regprocedure::text AS signature, p.proname, p.proconfig, "
        "       ARRAY(SELECT pg_catalog.format_type(t, NULL) "
        "             FROM pg_catalog.unnest(p.proargtypes::oid[]) AS t) AS arguments "
        "FROM pg_proc AS p WHERE p.prosecdef AND p.pronamespace = 'public'::regnamespace "
        "ORDER BY 1"
    )
    assert len(definers) >= 6
    for definer in definers:
        # Other settings may ride along (lineage_analyze's lock_timeout); the path is this one.
        paths = [c for c in definer["proconfig"] if c.startswith("search_path=")]
        assert paths == ["search_path=pg_catalog, pg_temp"], definer["signature"]
    async with pool.acquire() as connection:
        # The trap works where a session does resolve through public first.
        with pytest.raises(asyncpg.RaiseError, match="planted unnest called"):
            await resolving_public_first(connection, "SELECT unnest('{a}'::text[])")
        called = []
        for definer in definers:
            arguments = ", ".join(SAMPLE_ARGUMENTS[t] for t in definer["arguments"])
            try:
                await resolving_public_first(
                    connection, f"SELECT * FROM {definer['proname']}({arguments})"
                )
            except asyncpg.PostgresError as exc:
                if "planted" in str(exc):
                    called.append(f"{definer['signature']}: {exc}")
        assert called == []
        # Past their token checks: the reads' statements and the audit rows they write.
        token = db.tenant_token(connection.vouching_key, "default")
        audit = '{"action": "walk_back", "key_id": "k", "target": "t", "detail": {}}'
        for call in (
            f"lineage_walk_back('a', 'default', 20, '{token}', '{audit}')",
            f"lineage_get_contexts('default', '{{a}}', '{token}', '{audit}')",
            f"lineage_trace_contexts('default', 't', '{token}', '{audit}')",
            f"lineage_list_contexts('default', 'any', 'any', 'any', 'any', 'any', '-infinity', "
            f"'infinity', '-infinity', '', 10, '{token}', '{audit}')",
        ):
            await resolving_public_first(connection, f"SELECT * FROM {call}")


async def resolving_public_first(connection: asyncpg.Connection, query: str) -> None:
    """The query in a transaction of the default tenant whose search_path puts public first."""
    async with connection.transaction():
        await db.set_tenant(connection, "default")
        await connection.execute("SET LOCAL search_path = public, pg_catalog")
        await connection.fetch(query)
