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
        context.run_migrations()
engine.dispose()
