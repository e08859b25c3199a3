"""Operations: the process's metrics in the Prometheus text format, for scraping."""

import hmac

from fastapi import APIRouter, Request, Response

from lineage.api import models
from lineage.api.deps import AppSettings
from lineage.core import metrics
from lineage.core.errors import Forbidden, Unauthorized
from lineage.services import auth

router = APIRouter(tags=["operations"])


@router.get("/metrics", response_class=Response, responses=models.EXPOSITION)
async def prometheus_metrics(request: Request, settings: AppSettings) -> Response:
    """Records appended by kind, walk latency, degrade-open failures, spool depth, streams.
    With LINEAGE_AUTH=keys the scraper sends `Authorization: Bearer <LINEAGE_METRICS_TOKEN>`."""
    if request.app.state.auth == "keys":
        if settings.metrics_token is None:
            raise Forbidden(
                "/metrics spans every tenant and needs its own token: set LINEAGE_METRICS_TOKEN "
                "on the service and give it to the scraper as a bearer token"
            )
        given = auth.bearer_token(request.headers.get("authorization", "")) or ""
        expected = settings.metrics_token.get_secret_value()
        if not given or not hmac.compare_digest(given.encode(), expected.encode()):
            raise Unauthorized(
                "send the metrics token: Authorization: Bearer <LINEAGE_METRICS_TOKEN>"
            )
    body, content_type = metrics.exposition()
    return Response(body, media_type=content_type)
