"""Which transform version is older.

`transform_version` is `name@version`. Older means lower by PEP 440 on the part after `@`
when it parses; versions that do not parse sort below those that do, and among themselves by
first appearance. `version_key` turns a PEP 440 version into a string whose byte order
(COLLATE "C") is the PEP 440 order, so SQL can pick the newest without Python.
"""

from packaging.version import InvalidVersion, Version

_PHASES = {"dev": "0", "a": "1", "b": "2", "rc": "3", "final": "4", "post": "5"}


def _number(value: int) -> str:
    return f"{value:010d}"


def version_key(transform_version: str) -> str | None:
    _, _, number = transform_version.partition("@")
    try:
        version = Version(number)
    except InvalidVersion:
        return None
    release = list(version.release)
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    # The space ends the release part and sorts below '.', so 1 < 1.0.1.
    parts = [_number(version.epoch), ".".join(_number(n) for n in release) + " "]
    if version.pre is not None:
        parts.append(_PHASES[version.pre[0]] + _number(version.pre[1]))
    elif version.dev is not None and version.post is None:
        parts.append(_PHASES["dev"] + _number(version.dev))
    else:
        parts.append(_PHASES["final"])
    if version.post is not None:
        parts.append(_PHASES["post"] + _number(version.post))
    if version.dev is not None and (version.pre is not None or version.post is not None):
        parts.append(_PHASES["dev"] + _number(version.dev))
    else:
        parts.append(_PHASES["final"])
    return "!".join(parts)
