"""Operations: the process's metrics in the Prometheus text format, for scraping."""

from fastapi import APIRouter, Response

from lineage import metrics

router = APIRouter(tags=["operations"])


@router.get("/metrics", response_class=Response)
async def prometheus_metrics() -> Response:
    """Records appended by kind, walk latency, degrade-open failures, spool depth, streams."""
    body, content_type = metrics.exposition()
    return Response(body, media_type=content_type)
