"""No CPU-heavy work on the event loop: a PROV export (seconds of CPU for a large walk) is
written in a worker thread, so every other request goes on meanwhile."""

import threading

import httpx
import pytest
from prov.model import ProvDocument

from lineage.interop import prov
from lineage.services.demo import load_incident
from lineage.store.postgres import PostgresStore


async def test_the_prov_export_is_written_off_the_event_loop(
    client: httpx.AsyncClient, store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await load_incident(store)
    loop_thread = threading.current_thread()  # the test's loop is the app's loop
    writers: list[threading.Thread] = []
    serialize = prov.serialize

    def watched(document: ProvDocument, output: str) -> str:
        writers.append(threading.current_thread())
        return serialize(document, output)

    monkeypatch.setattr(prov, "serialize", watched)
    answer = await client.get("/v1/contexts/answer_1/prov")
    assert answer.status_code == 200, answer.text
    assert writers and loop_thread not in writers
