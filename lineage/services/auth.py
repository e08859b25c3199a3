"""Tenants and scoped keys. A key is printed once; only the SHA-256 of its secret is kept.

A key reads `lk_<key id>_<secret>`: the id finds the row, the secret (256 random bits) is
compared by hash in constant time. Scopes: `ingest` appends, `read` walks and exports,
`verify` reads and also records verdicts (runs a judge), `admin` does all of that and also
forgets and manages keys.
"""

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any, Literal, get_args

import asyncpg

from lineage import db
from lineage.core import DEFAULT_TENANT
from lineage.core.errors import BadParameter, NotFound
from lineage.core.record import check_id
from lineage.db.database import Database
from lineage.services.key_cache import KeyCache

Scope = Literal["ingest", "read", "verify", "admin"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
GRANTS: dict[Scope, frozenset[Scope]] = {
    "ingest": frozenset({"ingest"}),
    "read": frozenset({"read"}),
    "verify": frozenset({"read", "verify"}),
    "admin": frozenset({"ingest", "read", "verify", "admin"}),
}
KEY_PATTERN = re.compile(r"^lk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")


@dataclass(frozen=True)
class Caller:
    """Who is asking: the tenant every query is confined to, and the key that said so."""

    tenant_id: str
    key_id: str | None
    scope: Scope

    def may(self, scope: Scope) -> bool:
        return scope in GRANTS[self.scope]


# Without keys (LINEAGE_AUTH=none) every request acts as the default tenant's administrator.
NO_AUTH_CALLER = Caller(DEFAULT_TENANT, None, "admin")


def _secret_hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def check_scope(scope: str) -> Scope:
    for known in SCOPES:
        if scope == known:
            return known
    raise BadParameter(f"scope {scope!r} is not one of {', '.join(SCOPES)}")


async def create_tenant(database: Database, tenant_id: str) -> bool:
    """Create a tenant (as the owner: the application role cannot); False if it existed."""
    check_id(tenant_id, "tenant name")
    async with database.tenant(tenant_id) as tx:
        return bool(await tx.fetch("tenant_create"))


async def create_key(
    database: Database, tenant_id: str, scope: str, label: str | None = None
) -> tuple[str, dict[str, Any]]:
    """A new key for the tenant: the token (show it once) and its stored description."""
    chosen = check_scope(scope)
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    async with database.tenant(tenant_id) as tx:
        try:
            [row] = await db.fetch(
                tx.connection,
                "key_create",
                key_id=key_id,
                tenant_id=tenant_id,
                scope=chosen,
                key_hash=_secret_hash(secret),
                label=label or "",
            )
        except asyncpg.ForeignKeyViolationError as exc:
            raise NotFound(
                f"no tenant {tenant_id!r}: create it first with `lineage tenant create`"
            ) from exc
    return f"lk_{key_id}_{secret}", dict(row)


async def revoke_key(database: Database, tenant_id: str, key_id: str) -> None:
    async with database.tenant(tenant_id) as tx:
        if not await tx.fetch("key_revoke", key_id=key_id):
            raise NotFound(f"no key {key_id!r} for tenant {tenant_id!r}")


async def tenant_token(database: Database, tenant_id: str) -> str | None:
    """The token that vouches for a tenant (read as the owner); None before the key exists."""
    async with database.connection() as connection:
        key = await db.fetch_vouching_key(connection)
    return None if key is None else db.tenant_token(key, tenant_id)


async def rotate_vouching_key(database: Database) -> None:
    """A new tenant vouching key (as the owner): every token made under the old one stops
    counting at once, so pools made before must be made again (restart the service; on Citus
    run `lineage distribute` to copy it to the workers)."""
    key = secrets.token_bytes(32)
    padded = key + bytes(32)
    async with database.connection() as connection:
        await connection.execute(
            "UPDATE tenant_vouching_key SET key = $1, inner_pad = $2, outer_pad = $3",
            key,
            bytes(byte ^ 0x36 for byte in padded),
            bytes(byte ^ 0x5C for byte in padded),
        )


async def list_keys(database: Database, tenant_id: str) -> list[dict[str, Any]]:
    async with database.tenant(tenant_id) as tx:
        return [dict(r) for r in await tx.fetch("key_list")]


def bearer_token(authorization: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value, else None."""
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token else None


async def _key(database: Database, key_id: str, keys: KeyCache | None) -> asyncpg.Record | None:
    async def lookup() -> asyncpg.Record | None:
        async with database.connection() as connection:
            rows = await db.fetch(connection, "key_lookup", key_id=key_id)
        return rows[0] if rows else None

    return await (lookup() if keys is None else keys.row(key_id, lookup))


async def authenticate(
    database: Database, token: str, keys: KeyCache | None = None
) -> Caller | None:
    """The caller a bearer token stands for; None for a malformed, unknown or revoked key.
    With `keys`, a key the cache holds is not looked up again."""
    match = KEY_PATTERN.fullmatch(token)
    if match is None:
        return None
    key_id, secret = match.groups()
    row = await _key(database, key_id, keys)
    if row is None or row["revoked"]:
        return None
    if not hmac.compare_digest(bytes(row["key_hash"]), _secret_hash(secret)):
        return None
    return Caller(row["tenant_id"], key_id, check_scope(row["scope"]))


async def still_valid(database: Database, caller: Caller, keys: KeyCache | None = None) -> bool:
    """Whether the key a browser session was opened with still stands (not revoked), so that
    revoking a key ends its sessions at once rather than when they expire."""
    if caller.key_id is None:
        return True  # LINEAGE_AUTH=none: no key behind the session
    row = await _key(database, caller.key_id, keys)
    return row is not None and not row["revoked"] and row["tenant_id"] == caller.tenant_id
