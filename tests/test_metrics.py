"""GET /metrics: the Prometheus text format, with what the issue names: records appended by
kind, walk latency histograms, degrade-open failures and the spool's depth."""

from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from lineage import derive
from lineage.api.app import create_app
from lineage.core import metrics
from lineage.settings import Settings
from lineage.store.postgres import PostgresStore


async def scrape(client: httpx.AsyncClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


async def test_metrics_count_appends_walks_degrades_and_the_spool(
    client: httpx.AsyncClient, store: PostgresStore
) -> None:
    documents = ("lineage_records_appended_total", (("kind", "document"),))
    chunks = ("lineage_records_appended_total", (("kind", "chunk"),))
    walks = ("lineage_walk_seconds_count", (("query", "walk_back"),))
    spool_full = ("lineage_degraded_total", (("reason", "spool_full"),))
    before = await scrape(client)

    doc = await derive(
        store, [], "d", "document", "loader", "1", source_uri="s3://d", context_id="d1"
    )
    await derive(store, [], "d", "document", "loader", "1", source_uri="s3://d", context_id="d1")
    await derive(store, [doc], "c", "chunk", "chunker", "1")
    assert (await client.get(f"/v1/contexts/{doc.context_id}/lineage")).status_code == 200
    metrics.count_degraded("spool_full", 2)
    metrics.set_spool_depth(7)

    after = await scrape(client)
    assert after[documents] - before.get(documents, 0) == 1  # the replay is not counted
    assert after[chunks] - before.get(chunks, 0) == 1
    assert after[walks] - before.get(walks, 0) == 1
    assert after[spool_full] - before.get(spool_full, 0) == 2
    assert after[("lineage_spool_depth", ())] == 7
    assert ("lineage_walk_seconds_bucket", (("le", "+Inf"), ("query", "walk_back"))) in after
    assert ("lineage_event_streams", ()) in after


async def test_with_keys_metrics_need_the_metrics_token(database_url: str, tmp_path: Path) -> None:
    """The figures span every tenant: no tenant's key opens them, only the operator's token."""
    for token in (None, "scrape-secret"):
        settings = Settings(auth="keys", data_dir=tmp_path, metrics_token=token)
        app = create_app(settings, database_url=database_url)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://l") as http:
                bare = await http.get("/metrics")
                wrong = await http.get("/metrics", headers={"authorization": "Bearer nope"})
                right = await http.get(
                    "/metrics", headers={"authorization": f"Bearer {token or ''}"}
                )
        if token is None:
            assert bare.status_code == wrong.status_code == right.status_code == 403
            assert "LINEAGE_METRICS_TOKEN" in bare.json()["detail"]
        else:
            assert bare.status_code == wrong.status_code == 401
            assert right.status_code == 200
            assert "lineage_records_appended_total" in right.text
