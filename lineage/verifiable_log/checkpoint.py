"""Checkpoints: a signed statement that a tenant's log had this size and root at this time.

A checkpoint is a C2SP tlog-checkpoint inside a C2SP signed note, so tools written for those
formats read it. Plain UTF-8 text:

    lineage/default                          origin: <LINEAGE_LOG_ORIGIN>/<tenant id>
    42                                       tree size (leaves), decimal
    7WFgq0VTiXvEcE02N0L6F8G0fB4Rmr1ZDknI...  RFC 6962 root hash, base64 (RFC 4648)
    time 2026-09-01T12:00:00.000000Z         when it was signed, RFC 3339 UTC
                                             (a blank line)
    — lineage Bk3Ng1mS0S2l...                em dash, key name, base64(key id || signature)

The note text is the first four lines with their newlines; the signature is Ed25519 over it.
key id = SHA-256(key name || 0x0A || 0x01 || public key)[:4]. A verifier key is written
`<key name>+<key id, 8 hex>+<base64(0x01 || public key)>` (the Go sumdb note format): that is
what `GET /v1/log/key` and `lineage log key` print, and what a verifier must get once, from a
source it trusts, before it trusts any checkpoint.

Nothing here touches the database: a verifier needs only this module and `merkle`.
"""

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from lineage.core.errors import CheckpointError
from lineage.core.record import ID_PATTERN, format_timestamp
from lineage.verifiable_log.merkle import HASH_SIZE

ED25519: Final = b"\x01"  # the signed-note signature type byte
_SIGNATURE_PREFIX: Final = "\u2014 "  # em dash, space
_TIME_PREFIX: Final = "time "


def origin_for(log_origin: str, tenant_id: str) -> str:
    return f"{log_origin}/{tenant_id}"


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    tree_size: int
    root_hash: bytes
    time: datetime

    @property
    def tenant_id(self) -> str:
        return self.origin.rsplit("/", 1)[1]

    def text(self) -> str:
        """The note text that gets signed."""
        root = base64.b64encode(self.root_hash).decode()
        time = _TIME_PREFIX + format_timestamp(self.time)
        return "".join(f"{line}\n" for line in (self.origin, self.tree_size, root, time))

    @classmethod
    def parse(cls, text: str) -> "Checkpoint":
        """The checkpoint a note text states; says which line is wrong when it is malformed."""
        lines = text.split("\n")
        if len(lines) != 5 or lines[4] != "":
            raise CheckpointError(
                "a checkpoint's text is four lines (origin, tree size, root hash, time), "
                f"each ending in a newline; got {len(lines) - 1} lines"
            )
        origin, size, root, time = lines[:4]
        if "/" not in origin or not ID_PATTERN.fullmatch(origin.rsplit("/", 1)[1]):
            raise CheckpointError(f"origin {origin!r} must be '<log origin>/<tenant id>'")
        if not size.isdigit() or (size != "0" and size.startswith("0")):
            raise CheckpointError(f"tree size {size!r} must be a decimal number")
        try:
            root_hash = base64.b64decode(root, validate=True)
        except binascii.Error as exc:
            raise CheckpointError(f"root hash {root!r} is not base64") from exc
        if len(root_hash) != HASH_SIZE:
            raise CheckpointError(f"root hash is {len(root_hash)} bytes; expected {HASH_SIZE}")
        if not time.startswith(_TIME_PREFIX):
            raise CheckpointError(f"fourth line {time!r} must be 'time <RFC 3339 UTC>'")
        try:
            moment = datetime.fromisoformat(time.removeprefix(_TIME_PREFIX))
        except ValueError as exc:
            raise CheckpointError(f"{time!r} is not an RFC 3339 time") from exc
        return cls(origin, int(size), root_hash, moment)

    @classmethod
    def from_note(cls, note: str) -> "Checkpoint":
        """The checkpoint a signed note states, signature NOT checked: for notes this service
        stored itself. Anyone else uses `VerifierKey.open`."""
        return cls.parse(_split_note(note)[0])


def _split_note(note: str) -> tuple[str, list[str]]:
    # The last blank line ends the text, which may hold blank lines itself.
    text, blank, signatures = note.rpartition("\n\n")
    if not blank or not signatures.endswith("\n"):
        raise CheckpointError(
            "a signed note is its text, a blank line, then signature lines ending in newlines"
        )
    return text + "\n", signatures.removesuffix("\n").split("\n")


def _key_id(name: str, public_key: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + ED25519 + public_key).digest()[:4]


def _check_key_name(name: str) -> None:
    if not name or any(c.isspace() or c == "+" for c in name):
        raise CheckpointError(f"key name {name!r} must be non-empty, without spaces or '+'")


@dataclass(frozen=True)
class VerifierKey:
    """A public key and its name: what checks a checkpoint's signature, off the server."""

    name: str
    public_key: bytes  # 32 bytes, RFC 8032

    @property
    def key_id(self) -> bytes:
        return _key_id(self.name, self.public_key)

    def __str__(self) -> str:
        encoded = base64.b64encode(ED25519 + self.public_key).decode()
        return f"{self.name}+{self.key_id.hex()}+{encoded}"

    @classmethod
    def parse(cls, text: str) -> "VerifierKey":
        parts = text.strip().split("+", 2)  # the base64 part may hold '+' itself
        if len(parts) != 3:
            raise CheckpointError(
                "a verifier key reads '<name>+<key id hex>+<base64 key>' "
                "(as GET /v1/log/key or `lineage log key` prints it)"
            )
        name, key_id, encoded = parts
        _check_key_name(name)
        try:
            key = base64.b64decode(encoded, validate=True)
        except binascii.Error as exc:
            raise CheckpointError("the verifier key's last part is not base64") from exc
        if len(key) != 1 + 32 or key[:1] != ED25519:
            raise CheckpointError("the verifier key is not an Ed25519 key (type 0x01, 32 bytes)")
        verifier = cls(name, key[1:])
        if verifier.key_id.hex() != key_id:
            raise CheckpointError(
                f"the verifier key's id {key_id} does not match its name and key "
                f"(expected {verifier.key_id.hex()}): it was altered or mistyped"
            )
        return verifier

    def open(self, note: str) -> Checkpoint:
        """The checkpoint in a signed note, once this key's signature on it verifies."""
        return Checkpoint.parse(self.verified_text(note))

    def verified_text(self, note: str) -> str:
        """The text of any signed note, once this key's signature on it verifies."""
        text, lines = _split_note(note)
        ours = [signature for line in lines if (signature := self._signature(line)) is not None]
        if not ours:
            raise CheckpointError(
                f"the note carries no signature by key {self.name} "
                f"(id {self.key_id.hex()}): it was signed by another key, or not at all"
            )
        try:
            for signature in ours:
                Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, text.encode())
        except InvalidSignature as exc:
            raise CheckpointError(
                f"the signature by {self.name} does not verify: its text was altered after signing"
            ) from exc
        return text

    def _signature(self, line: str) -> bytes | None:
        """The signature on one line when the line is by this key, else None."""
        if not line.startswith(_SIGNATURE_PREFIX):
            raise CheckpointError(f"signature line {line[:40]!r} must start with '— '")
        name, _, encoded = line.removeprefix(_SIGNATURE_PREFIX).partition(" ")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except binascii.Error as exc:
            raise CheckpointError(f"the signature by {name} is not base64") from exc
        if name != self.name or raw[:4] != self.key_id:
            return None
        return raw[4:]


@dataclass(frozen=True)
class SigningKey:
    name: str
    private_key: Ed25519PrivateKey

    @property
    def verifier(self) -> VerifierKey:
        public = self.private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return VerifierKey(self.name, public)

    def sign(self, checkpoint: Checkpoint) -> str:
        """The checkpoint as a signed note."""
        return self.sign_text(checkpoint.text())

    def sign_text(self, text: str) -> str:
        """Any note text (ending in a newline) as a signed note."""
        signature = self.private_key.sign(text.encode())
        encoded = base64.b64encode(self.verifier.key_id + signature).decode()
        return f"{text}\n{_SIGNATURE_PREFIX}{self.name} {encoded}\n"


def generate_signing_key(name: str) -> SigningKey:
    _check_key_name(name)
    return SigningKey(name, Ed25519PrivateKey.generate())


@cache
def load_signing_key(path: Path, name: str, *, create: bool) -> SigningKey:
    """The key in a PEM file; with ``create``, a new key is written there (mode 0600) when the
    file is missing, atomically, so concurrent first uses agree on one key."""
    _check_key_name(name)
    if not path.exists():
        if not create:
            raise CheckpointError(f"no signing key at {path}")
        _create_key_file(path)
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except ValueError as exc:
        raise CheckpointError(f"{path} holds no unencrypted PEM private key: {exc}") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise CheckpointError(
            f"{path} holds a {type(key).__name__}; checkpoints need an Ed25519 key"
        )
    return SigningKey(name, key)


def _create_key_file(path: Path) -> None:
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(pem)
    try:
        os.link(draft, path)  # fails if another process won the race: its key stands
    except FileExistsError:
        pass
    finally:
        draft.unlink()
