"""`lineage selftest`: the whole signing cycle on a throwaway database, created and dropped on
the configured server, so that the configured database's data is never touched.

Build a record with derive() (the store signs it), read it back, verify it (true), alter its
row as the database owner the way an attacker with the superuser's password could, verify it
again (false, reason mismatch).
"""

import asyncio
import secrets
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from lineage import db
from lineage.core import DEFAULT_TENANT
from lineage.core.derive import derive
from lineage.core.errors import StepFailed
from lineage.core.hashing import content_hash
from lineage.core.record import ContextRecord
from lineage.db import keyring
from lineage.db.database import Database
from lineage.db.migrate import migrate
from lineage.services import signing
from lineage.services.records import get_records
from lineage.services.transaction_store import TransactionStore
from lineage.settings import Settings

TENANT = DEFAULT_TENANT
# Step reports: whether it went as it must, and what happened.
Report = Callable[[bool, str], None]


def throwaway_url(server_url: str, name: str) -> str:
    return urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))


def _server_name(url: str) -> str:
    """host:port, or the socket directory; never the password."""
    parts = conninfo_to_dict(url)
    host = str(parts.get("host") or "localhost")
    return f"{host}:{parts['port']}" if parts.get("port") else host


def run_selftest(
    settings: Settings, server_url: str, signer: keyring.Signer, report: Report
) -> bool:
    """Every step reported; True when all went as they must. The throwaway database is dropped
    whatever happens once it exists."""
    name = f"lineage_selftest_{secrets.token_hex(6)}"
    where = _server_name(server_url)
    try:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.Error as exc:
        report(False, f"could not create a throwaway database on {where} (needs CREATEDB): {exc}")
        return False
    report(True, f"created throwaway database {name} on {where}")
    url = throwaway_url(server_url, name)
    try:
        migrate(url)
        report(True, "migrated it to the newest schema")
        asyncio.run(_cycle(settings, url, signer, report))
        return True
    except StepFailed as exc:
        report(False, str(exc))
        return False
    except Exception as exc:  # whatever broke is the selftest's finding: report it, clean up
        report(False, f"{type(exc).__name__}: {exc}")
        return False
    finally:
        try:
            with psycopg.connect(server_url, autocommit=True) as admin:
                admin.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
            report(True, f"dropped database {name}")
        except psycopg.Error as exc:
            report(False, f"could not drop {name}; drop it by hand: {exc}")


async def _cycle(settings: Settings, url: str, signer: keyring.Signer, report: Report) -> None:
    database = await Database.connect(settings, url, signer=signer, max_size=2)
    try:
        async with database.tenant(TENANT) as tx:
            made = await derive(
                TransactionStore(tx),
                [],
                "lineage selftest: a document to sign, store, read back and alter.",
                "document",
                "selftest",
                "1",
                source_uri="selftest://document",
            )
        report(True, f"built and stored a record with derive(): document {made.context_id}")
        record, check = await _read_back(database, made.context_id)
        if not check.signed:
            raise StepFailed("the store wrote no signature beside the record")
        report(True, f"signed it with key {check.key_id}; the signature is stored with it")
        if record.canonical_bytes() != made.record.canonical_bytes():
            raise StepFailed("the record read back differs from the one derive() made")
        report(True, "read it back: its canonical form is the one that was signed")
        if not check.verified:
            raise StepFailed(f"the untouched record does not verify (reason {check.reason})")
        report(True, "verified: true (reason ok)")

        await _alter(url, made.context_id)
        report(
            True,
            "altered its row as the database owner (append-only trigger disabled for one "
            "UPDATE of content_hash, then enabled again)",
        )
        _, check = await _read_back(database, made.context_id)
        if check.verified or check.reason != "mismatch":
            raise StepFailed(
                f"the altered record reports verified={check.verified}, reason {check.reason}; "
                "it must report false, mismatch"
            )
        report(True, "verified again: false (reason mismatch): the alteration is detected")
    finally:
        await database.close()


async def _read_back(
    database: Database, context_id: str
) -> tuple[ContextRecord, signing.SignatureCheck]:
    async with database.tenant(TENANT) as tx:
        record = (await get_records(tx, [context_id]))[context_id]
        return record, await signing.verify_record(tx.connection, TENANT, record, tx.signer)


async def _alter(url: str, context_id: str) -> None:
    owner = await asyncpg.connect(url)
    try:
        async with owner.transaction():
            # The owner may be subject to row-level security too (it is forced).
            await owner.execute("SELECT set_config($1, $2, true)", db.TENANT_SETTING, TENANT)
            await owner.execute("ALTER TABLE provenance DISABLE TRIGGER provenance_append_only")
            await owner.execute(
                "UPDATE provenance SET content_hash = $1 WHERE tenant_id = $2 AND context_id = $3",
                content_hash("an altered document"),
                TENANT,
                context_id,
            )
            await owner.execute(
                "ALTER TABLE provenance ENABLE ALWAYS TRIGGER provenance_append_only"
            )
    finally:
        await owner.close()
