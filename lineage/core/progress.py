"""How long work says how far it has got: a callback its caller passes in. The command line
draws it as a bar on stderr (lineage.cli.progress); elsewhere nobody watches."""

from typing import Protocol


class Progress(Protocol):
    def __call__(
        self, phase: str, done: int = 0, total: int | None = None, detail: str = ""
    ) -> None:
        """`done` of `total` (None: not known) units of `phase`; a new phase ends the last."""


def unwatched(phase: str, done: int = 0, total: int | None = None, detail: str = "") -> None:
    """The progress of work that nobody watches."""
