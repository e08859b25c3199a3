"""Errors a caller can act on; the HTTP layer maps each class to one status in one place."""


class LineageError(Exception):
    """Base class: the message says what went wrong and what to fix."""


class InvalidRecord(LineageError):
    """A record breaks a rule; `rule` names it so callers can branch on it. Nothing was written."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.message = message


class NotFound(LineageError):
    """The id is unknown to this tenant (another tenant's id looks exactly the same)."""


class Conflict(LineageError):
    """The id exists with other content; records are append-only."""


class WalkTimeout(LineageError):
    """A walk ran past the statement timeout and has no complete answer."""


class StoreUnavailable(LineageError):
    """The store itself failed (database or API down); the record was not written."""


class BadParameter(LineageError):
    """A query parameter is out of range or malformed."""


class Unauthorized(LineageError):
    """No key, or a key that is malformed, unknown or revoked."""


class Forbidden(LineageError):
    """A valid key whose scope does not cover the request; says nothing about data."""
