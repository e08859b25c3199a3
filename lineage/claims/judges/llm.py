"""An LLM grader behind an OpenAI-compatible endpoint."""

import asyncio
import json
import re
from typing import Any, Final

import httpx

from lineage.claims.judges.base import Judgement, Outcome

PROMPT_VERSION: Final = "1"
_SYSTEM_PROMPT: Final = """You check whether a claim is supported by a premise.
Use only the premise and common unit conversions; no other outside knowledge.
Reply with one JSON object and nothing else:
{"verdict": "entailed" | "not_entailed" | "unknown", "reason": "<one sentence>"}
- entailed: the premise states or directly implies every part of the claim.
- not_entailed: the premise contradicts the claim, or lacks a figure, date, name or condition
  the claim asserts.
- unknown: you cannot decide.
The reason names the words or figures that decide it, quoting both texts where they differ."""


class OpenAICompatibleJudge:
    """An LLM grader behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Every grader failure (timeout, transport error, HTTP error, output that is not a JSON verdict,
    an unrecognised verdict word) becomes ``unknown`` with the failure as the reason; ``judge``
    does not raise for them. ``timeout_s`` bounds the whole call. Pass ``client`` to reuse
    connections (the caller closes it); otherwise each call opens and closes its own.
    """

    name: str = "openai-compatible"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout_s: float = 10.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.version = f"{model};prompt-{PROMPT_VERSION}"
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._client = client

    def request_body(self, premise: str, hypothesis: str) -> dict[str, Any]:
        """The chat-completion request this judge sends."""
        return {
            "model": self.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": _SYSTEM_PROMPT},
                {"role": "user", "content": f"Premise:\n{premise}\n\nClaim:\n{hypothesis}"},
            ],
        }

    async def judge(self, premise: str, hypothesis: str) -> Judgement:
        outcome, reason = await self._ask(premise, hypothesis)
        return Judgement(outcome, reason, self.name, self.version)

    async def _ask(self, premise: str, hypothesis: str) -> tuple[Outcome, str]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body = self.request_body(premise, hypothesis)
        try:
            async with asyncio.timeout(self._timeout_s):
                if self._client is not None:
                    response = await self._post(self._client, body, headers)
                else:
                    async with httpx.AsyncClient() as client:
                        response = await self._post(client, body, headers)
        except (TimeoutError, httpx.TimeoutException):
            return "unknown", f"grader failed: no answer within {self._timeout_s:g} s"
        except (httpx.HTTPError, OSError) as exc:
            return "unknown", f"grader failed: {type(exc).__name__}: {exc}"
        if not response.is_success:
            snippet = response.text[:200].strip()
            return (
                "unknown",
                f"grader failed: HTTP {response.status_code} from {self.url}: {snippet}",
            )
        return _read_completion(response.content)

    async def _post(
        self, client: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str]
    ) -> httpx.Response:
        return await client.post(self.url, json=body, headers=headers, timeout=self._timeout_s)


def _read_completion(raw: bytes) -> tuple[Outcome, str]:
    try:
        payload = json.loads(raw)
    except ValueError:
        return "unknown", f"grader failed: response is not JSON: {raw[:200]!r}"
    content = _completion_content(payload)
    if content is None:
        return "unknown", "grader failed: response has no choices[0].message.content string"
    verdict = _first_json_object(content)
    if verdict is None:
        return "unknown", f"grader failed: output is not a JSON verdict: {content[:200]!r}"
    word = verdict.get("verdict")
    normalised = re.sub(r"[\s-]+", "_", word.strip().lower()) if isinstance(word, str) else ""
    reason = verdict.get("reason")
    text = reason.strip() if isinstance(reason, str) and reason.strip() else "(no reason given)"
    if normalised == "entailed":
        return "entailed", text
    if normalised == "not_entailed":
        return "not_entailed", text
    if normalised == "unknown":
        return "unknown", text
    return "unknown", f"grader failed: unrecognised verdict {word!r}"


def _completion_content(payload: object) -> str | None:
    if not isinstance(payload, dict):
        return None
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    return content if isinstance(content, str) else None


def _first_json_object(content: str) -> dict[str, Any] | None:
    """The first JSON object in the output; models often wrap it in prose or a code fence."""
    start = content.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(content, start)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
