"""The store that talks to the HTTP API, so a pipeline needs no database credentials."""

from collections.abc import Sequence
from typing import Any

import httpx

from lineage.core import telemetry
from lineage.core.errors import Conflict, Forbidden, InvalidRecord, StoreUnavailable, Unauthorized
from lineage.core.record import ContextRecord, NewContext
from lineage.store.base import Appended

# The service sheds load with 429: like a 5xx, the same request can succeed later.
TOO_MANY_REQUESTS = 429


class HttpStore:
    def __init__(
        self,
        base_url: str,
        tenant_id: str = "default",
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
        if response.status_code >= 500 or response.status_code == TOO_MANY_REQUESTS:
            raise StoreUnavailable(f"lineage API answered {response.status_code}")
        problem = response.json() if response.status_code >= 400 else {}
        # The key, not the records, was refused: a credential failure, never a bad record.
        if response.status_code == 401:
            raise Unauthorized(problem.get("detail", "the lineage API refused the key"))
        if response.status_code == 403:
            raise Forbidden(problem.get("detail", "the key's scope does not allow appends"))
        if response.status_code == 409:
            raise Conflict(problem.get("detail", "conflict"))
        if response.status_code >= 400:
            raise InvalidRecord(problem.get("rule", "invalid"), problem.get("detail", str(problem)))
        return [
            Appended(ContextRecord.model_validate(item["record"]), created=item["created"])
            for item in response.json()["results"]
        ]

    async def get(self, context_id: str) -> ContextRecord | None:
        response = await self._request("GET", f"/v1/contexts/{context_id}")
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise StoreUnavailable(f"lineage API answered {response.status_code}")
        return ContextRecord.model_validate(response.json())
