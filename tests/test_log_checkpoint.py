"""Checkpoints and signed notes (no database): the format, the signature, keys, and appending
to a tree from its frontier alone."""

import base64
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.core.errors import CheckpointError
from lineage.verifiable_log import merkle
from lineage.verifiable_log.checkpoint import (
    Checkpoint,
    SigningKey,
    VerifierKey,
    generate_signing_key,
    load_signing_key,
)

# golang.org/x/mod/sumdb/note's example: Ed25519 is deterministic, so signing its text with its
# key must give its note byte for byte, and its verifier key must open it.
GO_VERIFIER_KEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_SEED = "AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"  # 0x01 || the 32-byte seed
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
GO_NOTE = (
    GO_TEXT + "\n\u2014 PeterNeumann "
    "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)

KEY = generate_signing_key("lineage.test")
CHECKPOINT = Checkpoint(
    "lineage.test/default", 42, merkle.leaf_hash(b"x"), datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
)


def test_go_signed_note_vector() -> None:
    seed = base64.b64decode(GO_SEED)[1:]
    signer = SigningKey("PeterNeumann", Ed25519PrivateKey.from_private_bytes(seed))
    assert str(signer.verifier) == GO_VERIFIER_KEY
    assert signer.sign_text(GO_TEXT) == GO_NOTE
    verifier = VerifierKey.parse(GO_VERIFIER_KEY)
    assert verifier.verified_text(GO_NOTE) == GO_TEXT
    with pytest.raises(CheckpointError, match="does not verify"):
        verifier.verified_text(GO_NOTE.replace("cryptography", "cryptographY"))


def test_verifier_key_base64_may_hold_a_plus() -> None:
    key = VerifierKey.parse("TEST+7997405c+AQcC+FTVKf0jlTdHDY3rbevmnKxxPjigCXlVtGe6RIr6")
    assert key.name == "TEST" and len(key.public_key) == 32


def test_checkpoint_format() -> None:
    note = KEY.sign(CHECKPOINT)
    text, signature = note.split("\n\n")
    assert text.split("\n") == [
        "lineage.test/default",
        "42",
        base64.b64encode(CHECKPOINT.root_hash).decode(),
        "time 2026-09-01T12:00:00.000000Z",
    ]
    assert signature.startswith("\u2014 lineage.test ") and signature.endswith("\n")
    assert KEY.verifier.open(note) == CHECKPOINT
    assert CHECKPOINT.tenant_id == "default"
    assert VerifierKey.parse(str(KEY.verifier)) == KEY.verifier


@settings(max_examples=200, deadline=None, database=None)
@given(data=st.data())
def test_any_change_to_a_signed_checkpoint_fails(data: st.DataObject) -> None:
    """The size, root, origin and time are signed: flip any bit of the text and it fails."""
    note = KEY.sign(CHECKPOINT)
    text = note.encode()[: note.index("\n\n") + 1]
    position = data.draw(st.integers(0, len(text) - 1))
    bit = data.draw(st.integers(0, 7))
    flipped = bytearray(note.encode())
    flipped[position] ^= 1 << bit
    try:
        changed = flipped.decode()
    except UnicodeDecodeError:
        return  # not even text
    with pytest.raises(CheckpointError):
        KEY.verifier.open(changed)


def test_only_the_right_key_opens_a_checkpoint() -> None:
    note = KEY.sign(CHECKPOINT)
    other = generate_signing_key("lineage.test")
    with pytest.raises(CheckpointError, match=r"no signature by key lineage\.test"):
        other.verifier.open(note)
    # Another key's signature under our key's name and id does not pass for ours.
    text = CHECKPOINT.text()
    signature = other.private_key.sign(text.encode())
    relabelled = base64.b64encode(KEY.verifier.key_id + signature).decode()
    forged = f"{text}\n\u2014 lineage.test {relabelled}\n"
    with pytest.raises(CheckpointError, match="does not verify"):
        KEY.verifier.open(forged)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lineage/default\n42\n", "four lines"),
        ("lineage\n1\nAAAA\ntime 2026-09-01T12:00:00Z\n", "origin"),
        ("lineage/default\n042\n" + "A" * 43 + "=\ntime 2026-09-01T12:00:00Z\n", "decimal"),
        ("lineage/default\n1\nnot base64!\ntime 2026-09-01T12:00:00Z\n", "not base64"),
        ("lineage/default\n1\nAAAA\ntime 2026-09-01T12:00:00Z\n", "3 bytes"),
        ("lineage/default\n1\n" + "A" * 43 + "=\nwhen 2026\n", "time <RFC 3339"),
        ("lineage/default\n1\n" + "A" * 43 + "=\ntime yesterday\n", "not an RFC 3339"),
    ],
)
def test_malformed_checkpoints_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        Checkpoint.parse(text)
    with pytest.raises(CheckpointError, match=message):
        KEY.verifier.open(KEY.sign_text(text))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("PeterNeumann+c74f20a3", "reads '<name>"),
        ("Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "key name"),
        ("PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "does not match"),
        ("PeterNeumann+c74f20a3+AhpZ2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "not an Ed25519"),
        ("PeterNeumann+c74f20a3+!!!", "not base64"),
    ],
)
def test_malformed_verifier_keys_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        VerifierKey.parse(text)


def test_unsigned_or_malformed_notes_are_rejected() -> None:
    with pytest.raises(CheckpointError, match="blank line"):
        KEY.verifier.open(CHECKPOINT.text())
    with pytest.raises(CheckpointError, match="must start with"):
        KEY.verifier.open(CHECKPOINT.text() + "\n- lineage.test AAAA\n")


def test_signing_key_file_is_made_once_private_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "signing.pem"
    with pytest.raises(CheckpointError, match="no signing key"):
        load_signing_key(path, "lineage.test", create=False)
    made = load_signing_key(path, "lineage.test", create=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert list(path.parent.iterdir()) == [path]  # no draft left behind
    load_signing_key.cache_clear()
    again = load_signing_key(path, "lineage.test", create=True)
    assert again.verifier == made.verifier


def test_signing_key_file_must_hold_an_ed25519_key(tmp_path: Path) -> None:
    path = tmp_path / "ec.pem"
    path.write_bytes(
        generate_private_key(SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(CheckpointError, match="need an Ed25519 key"):
        load_signing_key(path, "lineage.test", create=False)
    path.write_text("not a key")
    with pytest.raises(CheckpointError, match="no unencrypted PEM"):
        load_signing_key(path, "other.name", create=False)


# --- appending from the frontier ----------------------------------------------------------------

LEAVES = [merkle.leaf_hash(i.to_bytes(2, "big")) for i in range(300)]


@settings(max_examples=150, deadline=None, database=None)
@given(old_size=st.integers(0, 150), added=st.integers(0, 150))
def test_completed_subtrees_are_exactly_the_new_complete_subtrees(
    old_size: int, added: int
) -> None:
    new_size = old_size + added
    frontier = {
        merkle.subtree_node(*piece): merkle.range_hash(LEAVES, *piece)
        for piece in merkle.subtree_ranges(0, old_size)
    }
    assert list(frontier) == merkle.frontier(old_size)
    made = merkle.completed_subtrees(frontier, old_size, LEAVES[old_size:new_size])
    expected = {
        (level, start >> level)
        for level in range(new_size.bit_length())
        for start in range(0, new_size, 1 << level)
        if old_size < start + (1 << level) <= new_size
    }
    assert set(made) == expected
    for (level, index), hash_ in made.items():
        assert hash_ == merkle.range_hash(LEAVES, index << level, (index + 1) << level)
    assert merkle.root_from_subtrees({**frontier, **made}, new_size) == merkle.root_hash(
        LEAVES[:new_size]
    )
