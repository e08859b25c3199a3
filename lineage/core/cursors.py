"""Page cursors: every listing of the API answers `next`, an opaque cursor that the request for
the next page sends back as `cursor` (null on the last page). A cursor holds the position after
the page's last item, so following `next` sees each item once even while records are appended."""

import base64
import binascii
import json
from typing import Any

from lineage.core.errors import BadParameter

__all__ = ["decode", "encode"]


def encode(*position: str | int) -> str:
    """The cursor of a position: the sort key of the page's last item."""
    text = json.dumps(list(position), separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode(cursor: str, *shape: type) -> tuple[Any, ...]:
    """The position a cursor of this listing holds (each part of the type `shape` names), or
    BadParameter for anything this API did not hand out as `next`."""
    try:
        position = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        position = None
    if (
        not isinstance(position, list)
        or len(position) != len(shape)
        or not all(type(part) is kind for part, kind in zip(position, shape, strict=True))
    ):
        raise BadParameter("cursor is not one this API returned as `next`")
    return tuple(position)
