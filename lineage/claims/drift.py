"""The drift report: which agent and prompt version accounts for most unsupported claims and
merged statements, per day (or any fixed bucket), and how that changed since the bucket
before (sql/drift_by_produced_by.sql)."""

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from lineage.claims.verify import _since, check_bucket
from lineage.services import walks
from lineage.settings import Settings

__all__ = ["drift_lines", "drift_report"]


async def drift_report(
    pool: asyncpg.Pool,
    settings: Settings,
    tenant_id: str,
    since: datetime | str | None = None,
    bucket: str = "1 day",
) -> list[dict[str, Any]]:
    """Rows per bucket, produced_by and judge since `since` (default: the last 30 days)."""
    start = _since(since) if since else datetime.now(UTC) - timedelta(days=30)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    return await walks.run(
        pool,
        settings,
        "drift_by_produced_by",
        tenant_id=tenant_id,
        since=start,
        bucket=check_bucket(bucket),
    )


def _change(value: float | None) -> str:
    return "" if value is None else f"{value:+.2f}"


def drift_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The report as a plain table, one line per bucket, produced_by and judge."""
    if not rows:
        return ["nothing verified in this window"]
    header = ("bucket", "produced_by", "judge", "judged", "unsupported", "change", "merged",
              "change")  # fmt: skip
    table = [
        (str(r["bucket_start"]), r["produced_by"] or "(none)", str(r["judge"]), str(r["judged"]),
         f"{r['unsupported_rate']:.2f}", _change(r["unsupported_change"]),
         f"{r['merged_rate']:.2f}", _change(r["merged_change"]))
        for r in rows
    ]  # fmt: skip
    widths = [max(len(line[i]) for line in [header, *table]) for i in range(len(header))]
    return [
        "  ".join(
            cell.rjust(width) if i >= 3 else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in [header, *table]
    ]
