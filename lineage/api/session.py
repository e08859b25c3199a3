"""Browser sessions: a key exchanged once for a short-lived signed token in a cookie.

Browsers cannot put `Authorization: Bearer` on a download link or an EventSource, so the
explorer posts its key to `POST /v1/session` and the browser then carries `lineage_session`
(HttpOnly, SameSite=Strict). The token is the caller and an expiry, signed with HMAC-SHA256
under `settings.session_secret` (random per process when unset); the server stores nothing.
"""

import base64
import hashlib
import hmac
import json
import secrets
import time

from lineage.services.auth import Caller
from lineage.settings import Settings

__all__ = ["SESSION_COOKIE", "issue_session", "read_session"]

SESSION_COOKIE = "lineage_session"
# Keeps these signatures apart from anything else ever signed under the same secret.
_PURPOSE = b"lineage_session\x00"
_PROCESS_SECRET = secrets.token_bytes(32)


def _secret(settings: Settings) -> bytes:
    configured = settings.session_secret
    return configured.get_secret_value().encode() if configured else _PROCESS_SECRET


def _encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _signature(payload: str, settings: Settings) -> bytes:
    digest = hmac.new(_secret(settings), _PURPOSE + payload.encode(), hashlib.sha256).digest()
    return _encode(digest).encode()


def issue_session(caller: Caller, settings: Settings, *, now: float | None = None) -> str:
    """A token naming the caller, valid for `settings.session_ttl_seconds` from now."""
    expires = int((time.time() if now is None else now) + settings.session_ttl_seconds)
    fields = {
        "tenant_id": caller.tenant_id,
        "key_id": caller.key_id,
        "scope": caller.scope,
        "expires": expires,
    }
    payload = _encode(json.dumps(fields, separators=(",", ":")).encode())
    return f"{payload}.{_signature(payload, settings).decode()}"


def read_session(token: str, settings: Settings, *, now: float | None = None) -> Caller | None:
    """The caller a token names, or None when it is malformed, forged or expired."""
    payload, dot, signature = token.partition(".")
    if not dot or not hmac.compare_digest(signature.encode(), _signature(payload, settings)):
        return None
    # Signed by this secret, so the payload is one issue_session wrote.
    fields = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    if fields["expires"] <= (time.time() if now is None else now):
        return None
    return Caller(fields["tenant_id"], fields["key_id"], fields["scope"])
