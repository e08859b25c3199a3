"""Every error a caller can act on, in one table: each class names the HTTP status it is
answered with and the `rule` a caller can branch on. lineage/api/problems.py sends any of them
as application/problem+json; lineage/cli/errors.py prints any of them as one line; a client
of the API turns an answer back into its class with `error_of_answer`."""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import httpx


class LineageError(Exception):
    """Base class: the message says what went wrong and what to fix."""

    status: ClassVar[int] = 500
    rule: str = "internal_error"
    # The problem's title; the class name when None.
    title: ClassVar[str | None] = None
    headers: ClassVar[Mapping[str, str]] = {}

    @property
    def detail(self) -> str:
        return str(self)


# --- the caller's request ----------------------------------------------------------------------


class InvalidRecord(LineageError):
    """A record breaks a rule; `rule` names it so callers can branch on it. Nothing was written."""

    status = 422

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"{rule}: {message}")
        self.rule = rule
        self.message = message

    @property
    def detail(self) -> str:
        return self.message


class InvalidRequest(InvalidRecord):
    """The request itself cannot be taken: a malformed body or parameter, or a value the
    database cannot store (a NUL, a lone surrogate, a date past 9999)."""

    title = "InvalidRequest"


class InvalidExport(InvalidRequest):
    """Not a well-formed OTLP ExportTraceServiceRequest: OTLP/HTTP answers it with 400."""

    status = 400


class ExportTooLarge(InvalidExport):
    """An OTLP export of more spans than one request may carry."""

    status = 413


class BadParameter(LineageError):
    """A query parameter is out of range or malformed."""

    status = 422
    rule = "bad_parameter"


class UnavailableFormat(LineageError):
    """The prov package cannot write this format here (its optional extra is missing)."""

    status = 422
    rule = "prov_format"


class NotFound(LineageError):
    """The id is unknown to this tenant (another tenant's id looks exactly the same)."""

    status = 404
    rule = "not_found"


class Conflict(LineageError):
    """The id exists with other content; records are append-only."""

    status = 409
    rule = "append_only"


class BodyTooLarge(LineageError):
    """The body, as sent or decompressed, is larger than the service accepts."""

    status = 413
    rule = "body_too_large"


class UnsupportedEncoding(LineageError):
    """A Content-Encoding other than gzip."""

    status = 415
    rule = "unsupported_encoding"


class UnsupportedMediaType(LineageError):
    """A Content-Type the route does not read."""

    status = 415
    rule = "unsupported_media_type"


# --- the caller ------------------------------------------------------------------------------


class Unauthorized(LineageError):
    """No key, or a key that is malformed, unknown or revoked."""

    status = 401
    rule = "unauthenticated"
    headers: ClassVar[Mapping[str, str]] = {"WWW-Authenticate": 'Bearer realm="lineage"'}


class Forbidden(LineageError):
    """A valid key whose scope does not cover the request; says nothing about data."""

    status = 403
    rule = "out_of_scope"


class RequestTimeout(LineageError):
    """The body did not arrive within the read deadline; nothing was done."""

    status = 408
    rule = "body_read_timeout"


class TooManyRequests(LineageError):
    """A key or address that sent too many bad requests lately."""

    status = 429
    rule = "too_many_bad_requests"


class TooMuchAtOnce(LineageError):
    """The key or tenant already holds as many exports, impact files or event streams as it may
    at once (lineage/api/fairness.py); nothing was done."""

    status = 429
    rule = "concurrency_limit"
    headers: ClassVar[Mapping[str, str]] = {"Retry-After": "1"}


class Overloaded(LineageError):
    """This process has as many requests in progress as it takes; nothing was done."""

    status = 429
    rule = "overloaded"


# --- the service -------------------------------------------------------------------------------


class WalkTimeout(LineageError):
    """A walk ran past the statement timeout and has no complete answer."""

    status = 503
    rule = "walk_timeout"


class StoreUnavailable(LineageError):
    """The store itself failed (database or API down); the record was not written."""

    status = 503
    rule = "store_unavailable"
    headers: ClassVar[Mapping[str, str]] = {"Retry-After": "1"}


class VectorStoreRegistryError(LineageError):
    """The vector store registry (LINEAGE_VECTOR_STORES_FILE) cannot be read, is invalid, or is
    open to other users; nothing was forgotten. The message names the setting, never the path
    or a credential."""

    rule = "vector_store_registry"


class OtlpUnavailable(LineageError):
    """opentelemetry-proto is not installed (`pip install 'lineage[otlp]'`)."""

    status = 501
    rule = "otlp_unavailable"
    title = "NotImplemented"


class SigningKeyError(LineageError):
    """The keyring is missing, malformed, or open to other users."""

    rule = "signing_keyring"


class UnknownSigningKey(LineageError):
    """A signature names a key id that the signer does not hold."""

    rule = "unknown_signing_key"


class LogIntegrityError(LineageError):
    """The stored tree does not match what was signed: its tables were altered, or the database
    was restored from a backup older than the newest checkpoint. A 503, not a 500: nothing is
    signed until an operator recovers the log (runbooks/backup.md). The answer names no path of
    the server's; the full message, with `operator_note`, is logged at error level and counted
    (lineage_checkpoints_refused_total)."""

    status = 503
    rule = "log_integrity"

    def __init__(self, message: str, operator_note: str = "") -> None:
        super().__init__(f"{message}{operator_note}")
        self.message = message

    @property
    def detail(self) -> str:
        return self.message


class NotDistributable(LineageError):
    """The database is not a Citus coordinator, or its schema has something Citus refuses."""

    rule = "not_distributable"


class StepFailed(LineageError):
    """A selftest step did not go as it must; the message says what happened instead."""

    rule = "selftest_step"


# --- what a verifier finds (the CLI's log and bundle commands) ---------------------------------
# A 500 when the service finds it in its own checkpoints and proofs.


class ProofError(LineageError):
    """A proof did not verify; the message says which check failed."""

    rule = "proof"


class CheckpointError(LineageError):
    """A checkpoint or verifier key is malformed, or its signature does not verify."""

    rule = "checkpoint"


class NotConsistent(LineageError):
    """A newer checkpoint does not extend the saved one: the log was rewritten or forked."""

    status = 409
    rule = "not_consistent"


class BundleError(LineageError):
    """A bundle is malformed, incomplete or altered; nothing was written."""

    status = 422
    rule = "bundle"


# --- an answer of the API, back into its error ------------------------------------------------

# The classes whose rule is fixed, by that rule. InvalidRecord and its kin name the rule a record
# or request broke, one per instance, so they are not among them.
_BY_RULE: dict[str, type[LineageError]] = {
    vars(cls)["rule"]: cls
    for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, LineageError) and "rule" in vars(cls)
}
# What a status alone says, for an answer that names no rule (a proxy's, a crash's).
_BY_STATUS: dict[int, type[LineageError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
}


def error_of_answer(status: int, problem: Mapping[str, Any]) -> LineageError:
    """The error an error answer of the API stands for, from its problem+json body (empty for a
    body that is not one): the class its `rule` names; a rule no class fixes (a record's or a
    request's) is an InvalidRecord naming it. Only an answer without a rule is read by its
    status: a 5xx or 429 is StoreUnavailable (it may succeed later), any other 4xx an
    InvalidRecord unless the status names one class."""
    detail = str(problem.get("detail") or f"the lineage API answered {status}")
    rule = problem.get("rule")
    if isinstance(rule, str) and rule:
        named = _BY_RULE.get(rule)
        return InvalidRecord(rule, detail) if named is None else named(detail)
    if status >= 500 or status == 429:
        return StoreUnavailable(detail)
    by_status = _BY_STATUS.get(status)
    return InvalidRecord("invalid", detail) if by_status is None else by_status(detail)


# The service sheds load with 429: like a 5xx, the same request can succeed later.
TOO_MANY_REQUESTS = 429


def refusal(response: "httpx.Response") -> LineageError:
    """The error an error answer of the API stands for (here and for the log's auditor). One the
    service could not give now (a 5xx, or 429 when it sheds load) is StoreUnavailable whatever
    its rule, so that a spool keeps the records and a retry may take them; any other is the
    class its problem's rule names."""
    try:
        problem = response.json()
    except ValueError:  # not problem+json: a proxy's page, say
        problem = {}
    problem = problem if isinstance(problem, dict) else {}
    status = response.status_code
    if status >= 500 or status == TOO_MANY_REQUESTS:
        detail = problem.get("detail") or response.text[:200]
        return StoreUnavailable(f"lineage API answered {status}: {detail}")
    return error_of_answer(status, problem)
