"""Privacy by default: provenance holds hashes and pointers, never text.

- Text capture (into context_text, apart from provenance so it can be purged) is opt-in per
  tenant, with one switch per class of text: `capture_query_text` for queries,
  `capture_answer_text` for answers and claims, `capture_source_text` for everything else
  (documents, chunks, summaries, tool results...). All are off for a new tenant. Asking to
  capture a text whose switch is off is refused with InvalidRecord `capture_off`, naming the
  command that turns it on; nothing of that request is captured.
- Query, claim and answer texts are short and guessable, so their content hashes are keyed:
  `hmacsha256:` HMAC-SHA256 under the tenant's `text_hash_key` over the text's SHA-256. The
  one insert path keys every `sha256:` hash of those kinds (`keyed_proposals`), so the SDK,
  the API and spool replays all store keyed hashes, and a client never needs the key.
  Document hashes stay plain `sha256:`, so anyone holding the bytes can check them.
"""

import re
from collections.abc import Mapping, Sequence

import asyncpg

from lineage.core.body import Body
from lineage.core.errors import InvalidRecord, NotFound
from lineage.core.hashing import HmacSha256, Sha256
from lineage.core.record import KEYED_KINDS, NewContext
from lineage.db.database import Database, Transaction
from lineage.services import audit
from lineage.services.auth import Caller

__all__ = [
    "CAPTURE_SWITCHES",
    "TenantSettings",
    "capture",
    "capture_switch",
    "check_capture",
    "get_settings",
    "keyed_proposals",
    "text_hash_key",
    "update_settings",
]

CAPTURE_SWITCHES = ("capture_source_text", "capture_query_text", "capture_answer_text")
_SHA256 = re.compile(r"^sha256:([0-9a-f]{64})$")


def capture_switch(kind: str) -> str:
    """The switch that lets a record of this kind have its text captured."""
    if kind == "query":
        return "capture_query_text"
    if kind in {"claim", "answer"}:
        return "capture_answer_text"
    return "capture_source_text"


def _option(switch: str) -> str:
    return "--" + switch.replace("_", "-")


class TenantSettings(Body):
    tenant_id: str
    capture_source_text: bool
    capture_query_text: bool
    capture_answer_text: bool

    def captures(self, kind: str) -> bool:
        on: bool = getattr(self, capture_switch(kind))
        return on


def _settings_from_row(rows: Sequence[asyncpg.Record], tenant_id: str) -> TenantSettings:
    if not rows:
        raise NotFound(f"no tenant {tenant_id!r}: create it first with `lineage tenant create`")
    return TenantSettings(**dict(rows[0]))


async def tenant_settings(tx: Transaction) -> TenantSettings:
    rows = await tx.fetch("tenant_settings_get")
    return _settings_from_row(rows, tx.tenant_id)


async def get_settings(database: Database, tenant_id: str) -> TenantSettings:
    async with database.tenant(tenant_id) as tx:
        return await tenant_settings(tx)


async def update_settings(
    database: Database, caller: Caller, changes: Mapping[str, bool | None]
) -> TenantSettings:
    """Turn capture switches on or off (None keeps one as it is); audited with the changes."""
    unknown = sorted(set(changes) - set(CAPTURE_SWITCHES))
    if unknown:
        raise InvalidRecord(
            "unknown_setting", f"{', '.join(unknown)}: settings are {', '.join(CAPTURE_SWITCHES)}"
        )
    given = {switch: changes.get(switch) for switch in CAPTURE_SWITCHES}
    async with database.tenant(caller.tenant_id) as tx:
        rows = await tx.fetch("tenant_settings_update", **given)
        updated = _settings_from_row(rows, caller.tenant_id)
        changed = {switch: on for switch, on in given.items() if on is not None}
        await audit.append(
            tx,
            caller.key_id,
            "tenant_settings",
            caller.tenant_id,
            changed,
        )
    return updated


async def check_capture(tx: Transaction, kinds: Mapping[str, str]) -> None:
    """Refuse to capture (InvalidRecord `capture_off`) unless every record's switch is on.

    `kinds` maps each record to capture onto its kind.
    """
    settings = await tenant_settings(tx)
    refused = {i: capture_switch(kind) for i, kind in kinds.items() if not settings.captures(kind)}
    if not refused:
        return
    switches = sorted(set(refused.values()))
    shown = ", ".join(list(refused)[:5]) + (
        f" and {len(refused) - 5} more" if len(refused) > 5 else ""
    )
    off = f"{', '.join(switches)} {'is' if len(switches) == 1 else 'are'} off"
    command = f"lineage tenant settings {tx.tenant_id} {' '.join(_option(s) for s in switches)}"
    raise InvalidRecord(
        "capture_off",
        f"tenant {tx.tenant_id!r} does not capture text for {shown} ({off}); nothing was "
        f"captured. An admin turns it on with `{command}` or PUT /v1/tenant/settings",
    )


async def capture(tx: Transaction, texts: Mapping[str, str], kinds: Mapping[str, str]) -> list[str]:
    """Keep opt-in texts (id -> text) of the tenant's records whose kinds `kinds` gives, if
    every one's switch is on (else InvalidRecord `capture_off`, nothing captured); a record
    already captured keeps its text. The ids newly captured."""
    await check_capture(tx, {context_id: kinds[context_id] for context_id in texts})
    rows = await tx.fetch("claim_capture_text", context_ids=list(texts), texts=list(texts.values()))
    return [row["context_id"] for row in rows]


async def text_hash_key(tx: Transaction) -> bytes:
    """The tenant's secret key for keyed text hashes; it never leaves the service."""
    rows = await tx.fetch("tenant_settings_text_hash_key")
    if not rows:
        raise NotFound(
            f"tenant {tx.tenant_id!r} has no settings (nor text hash key): create tenants with "
            "`lineage tenant create`, which makes both"
        )
    return bytes(rows[0]["text_hash_key"])


def _needs_key(proposal: NewContext) -> bool:
    return proposal.kind in KEYED_KINDS and not proposal.content_hash.startswith(
        f"{HmacSha256.name}:"
    )


async def keyed_proposals(tx: Transaction, proposals: Sequence[NewContext]) -> Sequence[NewContext]:
    """The proposals with each query, claim and answer `sha256:` hash keyed for the tenant.

    Reads the key only when a proposal needs it. Refuses (InvalidRecord `unkeyed_hash`) any
    other algorithm for those kinds: it could not be keyed, and would stay guessable.
    """
    if not any(_needs_key(p) for p in proposals):
        return proposals
    for proposal in filter(_needs_key, proposals):
        if not _SHA256.fullmatch(proposal.content_hash):
            raise InvalidRecord(
                "unkeyed_hash",
                f"{proposal.context_id}: a {proposal.kind}'s content_hash must be "
                f"'{Sha256.name}:<64 hex>' (the service keys it with the tenant's text hash "
                f"key) or '{HmacSha256.name}:<hex>', not {proposal.content_hash[:80]!r}",
            )
    hasher = HmacSha256(await text_hash_key(tx))

    def keyed(proposal: NewContext) -> NewContext:
        digest = bytes.fromhex(proposal.content_hash.partition(":")[2])
        return proposal.model_copy(
            update={"content_hash": f"{hasher.name}:{hasher.key_digest(digest)}"}
        )

    return [keyed(p) if _needs_key(p) else p for p in proposals]
