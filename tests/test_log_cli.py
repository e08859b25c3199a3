"""`lineage log key | checkpoint | verify | monitor`: a checkpoint saved today proves tomorrow
that an answer's lineage was recorded and not rewritten."""

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
from typer.testing import CliRunner, Result

from lineage import cli
from lineage.core.hashing import content_hash
from lineage.core.record import NewContext
from lineage.db import keyring
from lineage.services.demo import ANSWER_ID, load_incident
from lineage.settings import Settings
from lineage.store import PostgresStore
from lineage.verifiable_log import merkle
from lineage.verifiable_log.checkpoint import Checkpoint, load_signing_key
from tests.test_log import tamper_with_record


async def lineage_log(database_url: str, data_dir: Path, *args: str) -> Result:
    # The CLI calls asyncio.run, which cannot nest in this test's running loop: use a thread.
    runner = CliRunner()
    return await asyncio.to_thread(
        runner.invoke,
        cli.app,
        ["log", *args],
        env={
            "LINEAGE_DATABASE_URL": database_url,
            "LINEAGE_DATA_DIR": str(data_dir),
            # The keyring the test's records were signed with.
            "LINEAGE_SIGNING_KEYS_FILE": str(keyring.keyring_path(Settings())),
            "COLUMNS": "200",
        },
    )


async def test_verify_and_monitor_from_saved_files(
    database_url: str, store: PostgresStore, owner: asyncpg.Connection, tmp_path: Path
) -> None:
    service_dir, auditor = tmp_path / "service", tmp_path / "auditor"
    auditor.mkdir()
    await load_incident(store)

    key = await lineage_log(database_url, service_dir, "key")
    assert key.exit_code == 0, key.output
    (auditor / "key.txt").write_text(key.stdout)
    saved = await lineage_log(
        database_url, service_dir, "checkpoint", "--out", str(auditor / "today.txt")
    )
    assert saved.exit_code == 0, saved.output
    assert "saved checkpoint of lineage/default, 11 records" in saved.stdout
    printed = await lineage_log(database_url, service_dir, "checkpoint")
    assert printed.stdout == (auditor / "today.txt").read_text()  # nothing new: the same one

    checkpoint = str(auditor / "today.txt")
    key_file = str(auditor / "key.txt")
    verified = await lineage_log(
        database_url, auditor, "verify", "--checkpoint", checkpoint, "--key", key_file, ANSWER_ID
    )
    assert verified.exit_code == 0, verified.output
    assert "verified: answer_1 and its 7 ancestors" in verified.stdout
    assert "chunk chunk_42" in verified.stdout

    await store.append(
        [
            NewContext(
                context_id="doc_later",
                kind="document",
                source_uri="s3://later.md",
                content_hash=content_hash("later"),
            )
        ]
    )
    assert (await lineage_log(database_url, service_dir, "checkpoint")).exit_code == 0
    monitored = await lineage_log(
        database_url,
        auditor,
        "monitor",
        "--old",
        checkpoint,
        "--key",
        key_file,
        "--out",
        str(auditor / "tomorrow.txt"),
    )
    assert monitored.exit_code == 0, monitored.output
    assert "grew from 11 to 12 records" in monitored.stdout
    assert Checkpoint.from_note((auditor / "tomorrow.txt").read_text()).tree_size == 12

    await tamper_with_record(owner, "chunk_42")
    failed = await lineage_log(
        database_url, auditor, "verify", "--checkpoint", checkpoint, "--key", key_file, ANSWER_ID
    )
    assert failed.exit_code == 1
    assert "FAIL  chunk_42: the record was changed after it was logged" in failed.stdout
    assert "NOT verified: 1 of 8 records" in failed.stdout


async def test_the_service_machine_may_use_its_own_key(
    database_url: str, store: PostgresStore, tmp_path: Path
) -> None:
    await load_incident(store)
    saved = tmp_path / "today.txt"
    await lineage_log(database_url, tmp_path, "checkpoint", "--out", str(saved))
    verified = await lineage_log(
        database_url, tmp_path, "verify", "--checkpoint", str(saved), "doc_contractors_v1"
    )
    assert verified.exit_code == 0, verified.output
    assert "and its 0 ancestors" in verified.stdout


async def test_a_forked_or_foreign_checkpoint_is_reported(
    database_url: str, store: PostgresStore, tmp_path: Path
) -> None:
    await load_incident(store)
    real = Checkpoint.from_note((await lineage_log(database_url, tmp_path, "checkpoint")).stdout)
    signer = load_signing_key(tmp_path / "log-signing-key.pem", "lineage", create=False)
    fork = tmp_path / "fork.txt"  # same key, same size, another history: shown to someone else
    fork.write_text(
        signer.sign(Checkpoint(real.origin, 11, merkle.leaf_hash(b"another history"), real.time))
    )
    monitored = await lineage_log(database_url, tmp_path, "monitor", "--old", str(fork))
    assert monitored.exit_code == 1
    assert "the log was rewritten" in monitored.output
    verified = await lineage_log(
        database_url, tmp_path, "verify", "--checkpoint", str(fork), ANSWER_ID
    )
    assert verified.exit_code == 1
    assert "does not match the root" in verified.stdout

    stranger = tmp_path / "stranger"
    stranger.mkdir()
    no_key = await lineage_log(
        database_url, stranger, "verify", "--checkpoint", str(fork), ANSWER_ID
    )
    assert no_key.exit_code == 1
    assert "pass --key" in no_key.output
    other_key = await lineage_log(database_url, stranger, "key")
    wrong = await lineage_log(
        database_url,
        stranger,
        "verify",
        "--checkpoint",
        str(fork),
        "--key",
        other_key.stdout,
        ANSWER_ID,
    )
    assert wrong.exit_code == 1
    assert "no signature by key lineage" in wrong.output


async def test_with_url_the_api_is_asked(database_url: str, tmp_path: Path) -> None:
    signer = load_signing_key(tmp_path / "log-signing-key.pem", "lineage", create=True)
    saved = tmp_path / "today.txt"
    saved.write_text(signer.sign(Checkpoint("lineage/default", 1, bytes(32), datetime.now(UTC))))
    unreachable = await lineage_log(
        database_url,
        tmp_path,
        "verify",
        "--checkpoint",
        str(saved),
        "--url",
        "http://127.0.0.1:9",
        "--api-key",
        "lk_x",
        ANSWER_ID,
    )
    assert unreachable.exit_code == 1
    assert "lineage API unreachable" in unreachable.output
