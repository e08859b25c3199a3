"""The fenced code blocks of a markdown page, as the runbook and documentation tests read them."""

import re
from dataclasses import dataclass

FENCE = re.compile(r"^```(?P<lang>[\w-]*)$")


@dataclass(frozen=True)
class Fence:
    opening: int  # the index of the ```lang line
    closing: int  # the index of the closing ``` line
    lang: str
    body: str


def fences(lines: list[str], where: str) -> list[Fence]:
    """Every fenced block of `lines`, in order; a fence never closed is an error at `where`."""
    found: list[Fence] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end] != "```":
            end += 1
        if end == len(lines):
            raise ValueError(f"{where}:{index + 1}: fence never closed")
        found.append(Fence(index, end, opening["lang"], "\n".join(lines[index + 1 : end])))
        index = end + 1
    return found
