"""Content hashes: algorithm-prefixed (`sha256:<hex>`), pluggable behind one small interface."""

import hashlib
from typing import Protocol


class ContentHasher(Protocol):
    name: str

    def hexdigest(self, data: bytes) -> str: ...


class Sha256:
    name = "sha256"

    def hexdigest(self, data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()


class Blake3:
    """Optional: needs the `blake3` package."""

    name = "blake3"

    def hexdigest(self, data: bytes) -> str:
        import blake3  # type: ignore[import-not-found,unused-ignore]

        digest: str = blake3.blake3(data).hexdigest()
        return digest


def content_hash(text: str | bytes, hasher: ContentHasher | None = None) -> str:
    data = text.encode() if isinstance(text, str) else text
    chosen = hasher or Sha256()
    return f"{chosen.name}:{chosen.hexdigest(data)}"


HASHERS: dict[str, ContentHasher] = {"sha256": Sha256(), "blake3": Blake3()}


def text_matches_hash(text: str, digest: str) -> bool:
    """Does `text` hash to a record's content_hash? Unknown algorithms cannot be checked: True."""
    algorithm, _, hexdigest = digest.partition(":")
    hasher = HASHERS.get(algorithm)
    if hasher is None:
        return True
    try:
        return hasher.hexdigest(text.encode()) == hexdigest
    except ImportError:
        return True
