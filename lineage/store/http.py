"""The store that talks to the HTTP API, so a pipeline needs no database credentials."""

from collections.abc import Sequence
from typing import Any

import httpx

from lineage.core import DEFAULT_TENANT, telemetry
from lineage.core.errors import LineageError, StoreUnavailable, error_of_answer
from lineage.core.record import ContextRecord, NewContext
from lineage.store.base import Appended

# The service sheds load with 429: like a 5xx, the same request can succeed later.
TOO_MANY_REQUESTS = 429


class HttpStore:
    def __init__(
        self,
        base_url: str,
        tenant_id: str = DEFAULT_TENANT,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.tenant_id = tenant_id
        self.client = client or httpx.AsyncClient(
            base_url=base_url, headers=headers, timeout=timeout_s
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self.client.request(
                method, path, headers=telemetry.outgoing_headers(), **kwargs
            )
        except httpx.HTTPError as exc:
            raise StoreUnavailable(f"lineage API unreachable: {exc!r}") from exc

    async def append(self, proposals: Sequence[NewContext]) -> list[Appended]:
        body = {"records": [p.model_dump(mode="json") for p in proposals]}
        response = await self._request("POST", "/v1/contexts/batch", json=body)
        if response.is_error:
            raise refusal(response)
        return [
            Appended(ContextRecord.model_validate(item["record"]), created=item["created"])
            for item in response.json()["results"]
        ]

    async def get(self, context_id: str) -> ContextRecord | None:
        response = await self._request("GET", f"/v1/contexts/{context_id}")
        if response.status_code == 404:
            return None
        if response.is_error:
            raise refusal(response)
        return ContextRecord.model_validate(response.json())


def refusal(response: httpx.Response) -> LineageError:
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
