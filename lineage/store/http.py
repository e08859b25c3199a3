"""The store that talks to the HTTP API, so a pipeline needs no database credentials."""

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from lineage.core import DEFAULT_TENANT, telemetry
from lineage.core.errors import BadParameter, StoreUnavailable, refusal
from lineage.core.queries import QueryIn
from lineage.core.record import ContextRecord, NewContext
from lineage.core.store import Appended


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

    async def append(
        self, proposals: Sequence[NewContext], *, texts: Mapping[str, str] | None = None
    ) -> list[Appended]:
        if texts:
            raise BadParameter("capture_text needs a PostgresStore; over HTTP, POST /v1/answers")
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

    async def text_hash_key(self) -> None:
        """The key never leaves the service: the API keys query, claim and answer hashes."""
        return

    async def record_query(self, query: QueryIn) -> dict[str, Any]:
        response = await self._request("POST", "/v1/queries", json=query.model_dump(mode="json"))
        if response.is_error:
            raise refusal(response)
        recorded: dict[str, Any] = response.json()
        return recorded
