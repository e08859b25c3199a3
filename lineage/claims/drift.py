"""The drift report: which agent and prompt version accounts for most unsupported claims and
merged statements, per day (or any fixed bucket), and how that changed since the bucket
before (sql/drift_by_produced_by.sql)."""

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from lineage.claims.verify import _since, bucket_label, check_bucket
from lineage.db.database import Database
from lineage.services import reads
from lineage.settings import Settings

__all__ = ["drift_report", "drift_table"]


async def drift_report(
    database: Database,
    settings: Settings,
    tenant_id: str,
    since: datetime | str | None = None,
    bucket: str = "1 day",
) -> list[dict[str, Any]]:
    """Rows per bucket, produced_by and judge since `since` (default: the last 30 days)."""
    start = _since(since) if since else datetime.now(UTC) - timedelta(days=30)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    return await reads.run(
        database,
        settings,
        "drift_by_produced_by",
        tenant_id=tenant_id,
        since=start,
        bucket=check_bucket(bucket),
    )


def _rate(rate: float, change: float | None) -> str:
    return f"{rate:.2f}" if change is None else f"{rate:.2f} {change:+.2f}"


def drift_table(rows: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, ...], list[list[str]]]:
    """The report's header and cells, one row per bucket, produced_by and judge; each rate
    with its change since the bucket before."""
    header = ("bucket", "produced_by", "judge", "judged", "unsupported", "merged")
    cells = [
        [bucket_label(r["bucket_start"]), r["produced_by"] or "(none)", str(r["judge"]),
         str(r["judged"]), _rate(r["unsupported_rate"], r["unsupported_change"]),
         _rate(r["merged_rate"], r["merged_change"])]
        for r in rows
    ]  # fmt: skip
    return header, cells
