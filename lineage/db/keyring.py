"""The keyring that signs records: HMAC-SHA256 of each record's canonical form under a key id.

The secrets live outside the database, in a keyring file (`Settings.signing_keys_file`, default
`data_dir/signing-keys.json`, mode 0600, made with one random 256-bit key on first use):
whoever can alter a row in PostgreSQL, its superuser included, cannot re-sign it. New records
are signed with the newest key; every key in the keyring still verifies. Key ids are random, so
a record signed under a keyring this one lacks reports `unknown_key`, never a false `mismatch`:
every replica, and every process that writes to the database directly, must share the file.

`Signer` is all that the insert path and the readers use, so a KMS-backed signer can replace
the keyring. The signatures themselves are stored and checked by lineage.services.signing.
"""

import base64
import contextlib
import dataclasses
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from lineage.core.errors import SigningKeyError, UnknownSigningKey
from lineage.core.record import ID_PATTERN, format_timestamp
from lineage.settings import Settings

KEYRING_NAME = "signing-keys.json"
SECRET_BYTES = 32  # 256 bits: no shorter than SHA-256's output, as RFC 2104 advises


class Signer(Protocol):
    """Signs and verifies bytes under key ids."""

    @property
    def current_key_id(self) -> str:
        """The key new signatures are made with."""
        ...

    def sign(self, data: bytes) -> tuple[str, bytes]:
        """The current key id and the signature of `data` under it."""
        ...

    def verify(self, key_id: str, data: bytes, signature: bytes) -> bool:
        """Whether `signature` is that of `data` under `key_id`, compared in constant time.

        Raises UnknownSigningKey when `key_id` is not one of the signer's keys.
        """
        ...


@dataclass(frozen=True)
class KeyringKey:
    """One HMAC key of the record keyring (the log's Ed25519 key is a checkpoint SigningKey)."""

    key_id: str
    secret: bytes = dataclasses.field(repr=False)
    created_at: str


class KeyringSigner:
    """HMAC-SHA256 under the newest of its keys; each of its keys verifies."""

    def __init__(self, keys: Sequence[KeyringKey]) -> None:
        if not keys:
            raise SigningKeyError("a signing keyring needs at least one key")
        self.keys = tuple(keys)
        self._secrets = {key.key_id: key.secret for key in keys}

    @property
    def current_key_id(self) -> str:
        return self.keys[-1].key_id

    def sign(self, data: bytes) -> tuple[str, bytes]:
        newest = self.keys[-1]
        return newest.key_id, hmac.digest(newest.secret, data, hashlib.sha256)

    def verify(self, key_id: str, data: bytes, signature: bytes) -> bool:
        secret = self._secrets.get(key_id)
        if secret is None:
            raise UnknownSigningKey(f"no signing key {key_id!r} in this keyring")
        return hmac.compare_digest(hmac.digest(secret, data, hashlib.sha256), signature)


def keyring_path(settings: Settings) -> Path:
    return settings.signing_keys_file or settings.data_dir / KEYRING_NAME


def new_key() -> KeyringKey:
    return KeyringKey(
        key_id=f"hmac-{secrets.token_hex(8)}",
        secret=secrets.token_bytes(SECRET_BYTES),
        created_at=format_timestamp(datetime.now(UTC)),
    )


def load_keyring(path: Path, *, create: bool) -> KeyringSigner:
    """The keyring in `path`; with `create`, a keyring of one new key is written there when the
    file is missing, atomically, so concurrent first uses agree on one key."""
    if not path.exists():
        if not create:
            raise SigningKeyError(
                f"no signing keyring at {path}: point LINEAGE_SIGNING_KEYS_FILE at the keyring "
                "the service signs with (a new one, from `lineage signing-key rotate`, would "
                "verify none of the records already signed)"
            )
        _write_keyring(path, [new_key()], replace=False)
    return KeyringSigner(read_keyring(path))


def rotate_keyring(path: Path) -> KeyringKey:
    """Add a new newest key (creating the keyring if missing); the older keys stay to verify."""
    keys = read_keyring(path) if path.exists() else []
    added = new_key()
    _write_keyring(path, [*keys, added], replace=True)
    return added


def read_keyring(path: Path) -> list[KeyringKey]:
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise SigningKeyError(
            f"{path} is open to other users (mode {mode:o}) but holds the secrets that sign "
            f"records: chmod 600 {path}"
        )
    try:
        document = json.loads(path.read_text())
        keys = [
            KeyringKey(
                key_id=str(item["key_id"]),
                secret=base64.b64decode(item["secret"], validate=True),
                created_at=str(item["created_at"]),
            )
            for item in document["keys"]
        ]
    except (ValueError, KeyError, TypeError) as exc:
        raise SigningKeyError(
            f"{path} is not a signing keyring "
            '({"keys": [{"key_id", "secret" (base64), "created_at"}, ...]}, newest last): '
            f"{type(exc).__name__}: {exc}"
        ) from exc
    ids = [key.key_id for key in keys]
    problems = [f"key id {i!r} is malformed" for i in ids if not ID_PATTERN.fullmatch(i)]
    problems += [f"key id {i!r} appears twice" for i in sorted(set(ids)) if ids.count(i) > 1]
    problems += [
        f"key {key.key_id!r} has a {len(key.secret)}-byte secret; at least {SECRET_BYTES} needed"
        for key in keys
        if len(key.secret) < SECRET_BYTES
    ]
    if not keys:
        problems.append("it holds no key")
    if problems:
        raise SigningKeyError(f"{path}: {'; '.join(problems)}")
    return keys


def _write_keyring(path: Path, keys: Sequence[KeyringKey], *, replace: bool) -> None:
    """Write a complete file beside `path`, then move it into place: never half a keyring."""
    document = {
        "keys": [
            {
                "key_id": key.key_id,
                "secret": base64.b64encode(key.secret).decode(),
                "created_at": key.created_at,
            }
            for key in keys
        ]
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w") as file:
            json.dump(document, file, indent=2)
            file.write("\n")
            file.flush()
            os.fsync(file.fileno())
        if replace:
            os.replace(draft, path)
        else:
            # Fails if another process won the race: its key stands.
            with contextlib.suppress(FileExistsError):
                os.link(draft, path)
    finally:
        draft.unlink(missing_ok=True)


def signer_for(settings: Settings) -> KeyringSigner:
    return load_keyring(keyring_path(settings), create=True)
