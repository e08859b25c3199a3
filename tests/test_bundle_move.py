"""Moving a tenant from the embedded PostgreSQL 18 to another server (PostgreSQL 15 in CI) is
`lineage export bundle` then `lineage import`: its walks answer the same there."""

import os
import uuid
from pathlib import Path

import pytest

from lineage.bundle.export import export_bundle
from lineage.bundle.load import import_bundle
from lineage.db.database import Database
from lineage.db.embedded import start_embedded
from lineage.db.migrate import migrate
from lineage.services.demo import load_incident, verify_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from lineage.verifiable_log import storage
from tests.conftest import EMBEDDED_TEST_DIR, database_at, janitor, url_for
from tests.test_bundle import walk_views

# Starts servers or browsers of its own: outside the fast tier.
pytestmark = pytest.mark.slow


@pytest.mark.embedded
async def test_a_tenant_moves_from_the_embedded_server_with_its_walks(
    database: Database, owner_database: Database, tmp_path: Path
) -> None:
    embedded = start_embedded(EMBEDDED_TEST_DIR)
    name = f"lineage_move_{uuid.uuid4().hex[:12]}"
    bundle = tmp_path / "acme.bundle"
    settings = Settings()
    with janitor(embedded, name):
        source_url = url_for(embedded, name)
        migrate(source_url)
        async with (
            database_at(source_url, settings) as source,
            database_at(source_url, settings, as_owner=True) as source_owner,
        ):
            assert await source.pool.fetchval("SHOW server_version_num") >= "180000"
            await load_incident(PostgresStore(source))
            await verify_incident(source)
            await export_bundle(source_owner, settings, "default", bundle, include_text=False)
            before = await walk_views(source, "default")

    imported = await import_bundle(
        owner_database, settings, bundle, "default", storage.signing_key(settings).verifier
    )
    if os.environ.get("LINEAGE_TEST_DATABASE_URL"):
        assert await database.pool.fetchval("SHOW server_version_num") < "180000"
    assert len(before["walk_back"]) > 5 and before["blast_radius"]
    assert await walk_views(database, "default") == before
    # The same tenant name, so the same canonical forms: the new log has the bundle's root.
    assert imported.root_hash == imported.verified.checkpoint.root_hash
