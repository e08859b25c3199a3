"""Content hashes: algorithm-prefixed (`sha256:<hex>`), pluggable behind one small interface."""

import hashlib
import hmac
from typing import Protocol


class ContentHasher(Protocol):
    name: str

    def hexdigest(self, data: bytes) -> str: ...


class Sha256:
    name = "sha256"

    def hexdigest(self, data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()


class HmacSha256:
    """Keyed, for short guessable texts (queries, claims, answers): HMAC-SHA256 under a
    tenant's key over the text's SHA-256, so the service can key a `sha256:` digest sent by a
    client that never holds the key."""

    name = "hmacsha256"

    def __init__(self, key: bytes) -> None:
        self._key = key

    def hexdigest(self, data: bytes) -> str:
        return self.key_digest(hashlib.sha256(data).digest())

    def key_digest(self, sha256_digest: bytes) -> str:
        return hmac.new(self._key, sha256_digest, hashlib.sha256).hexdigest()


def content_hash(text: str | bytes, hasher: ContentHasher | None = None) -> str:
    data = text.encode() if isinstance(text, str) else text
    chosen = hasher or Sha256()
    return f"{chosen.name}:{chosen.hexdigest(data)}"


HASHERS: dict[str, ContentHasher] = {"sha256": Sha256()}
# What a record's content_hash may use: the service can check a text against each of these, so a
# verdict can never be judged against a text it could not tie to the record.
VERIFIABLE_ALGORITHMS: tuple[str, ...] = (Sha256.name, HmacSha256.name)


def text_matches_hash(text: str, digest: str, key: bytes | None = None) -> bool:
    """Does `text` hash to a record's content_hash? An algorithm the service cannot check: False
    (such records are refused on the way in; older ones are never judged against a text).
    A keyed hash needs its tenant's key (services.privacy.text_hash_key); without it: False."""
    algorithm, _, hexdigest = digest.partition(":")
    if algorithm == HmacSha256.name:
        return key is not None and hmac.compare_digest(
            HmacSha256(key).hexdigest(text.encode()), hexdigest
        )
    hasher = HASHERS.get(algorithm)
    return hasher is not None and hmac.compare_digest(hasher.hexdigest(text.encode()), hexdigest)
