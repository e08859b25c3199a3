"""Alembic environment: runs the revisions in versions/ against the URL the caller configured."""

from alembic import context
from sqlalchemy import create_engine, pool

url = context.config.get_main_option("sqlalchemy.url")
if not url:
    raise RuntimeError("set sqlalchemy.url (lineage migrate does this from LINEAGE_DATABASE_URL)")

engine = create_engine(url, poolclass=pool.NullPool)
with engine.connect() as connection:
    context.configure(
        connection=connection,
        transactional_ddl=True,
        on_version_apply=context.config.attributes.get("on_version_apply", ()),
    )
    with context.begin_transaction():
        # On Citus, one connection per worker for the whole run: a revision that distributes a
        # function (0029) may not follow another's parallel DDL in the same transaction.
        connection.exec_driver_sql(
            "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN "
            "SET LOCAL citus.multi_shard_modify_mode TO 'sequential'; END IF; END $$"
        )
        context.run_migrations()
engine.dispose()
