"""Operations: the process's metrics in the Prometheus text format, for scraping."""

import hmac
from typing import Annotated, Any

from fastapi import APIRouter, Request, Response, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from lineage.api import models
from lineage.api.deps import AppSettings
from lineage.core import metrics
from lineage.core.errors import Forbidden, Unauthorized

router = APIRouter(tags=["operations"])

# Not a key: the metrics span every tenant, so the scraper has a token of its own.
METRICS_TOKEN = HTTPBearer(
    scheme_name="metrics_token",
    description="LINEAGE_METRICS_TOKEN, sent as `Authorization: Bearer <token>` "
    "(with LINEAGE_AUTH=none no token is needed)",
    auto_error=False,
)
UNSCRAPABLE: dict[int | str, dict[str, Any]] = {
    401: {"description": "no metrics token, or not the one the service was given"},
    403: {"description": "the service has no LINEAGE_METRICS_TOKEN: nobody may scrape it"},
}


@router.get("/metrics", response_class=Response, responses={**models.EXPOSITION, **UNSCRAPABLE})
async def prometheus_metrics(
    request: Request,
    settings: AppSettings,
    token: Annotated[HTTPAuthorizationCredentials | None, Security(METRICS_TOKEN)],
) -> Response:
    """Records appended by kind, walk latency, degrade-open failures, spool depth, streams.
    With LINEAGE_AUTH=keys the scraper sends `Authorization: Bearer <LINEAGE_METRICS_TOKEN>`."""
    if request.app.state.auth == "keys":
        if settings.metrics_token is None:
            raise Forbidden(
                "/metrics spans every tenant and needs its own token: set LINEAGE_METRICS_TOKEN "
                "on the service and give it to the scraper as a bearer token"
            )
        given = token.credentials if token is not None else ""
        expected = settings.metrics_token.get_secret_value()
        if not given or not hmac.compare_digest(given.encode(), expected.encode()):
            raise Unauthorized(
                "send the metrics token: Authorization: Bearer <LINEAGE_METRICS_TOKEN>"
            )
    body, content_type = metrics.exposition()
    return Response(body, media_type=content_type)
