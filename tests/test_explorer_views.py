"""The explorer's views in a real Chromium against `lineage serve`: the worked example's walk-back
drawn by layers with no false marks, pan and zoom, the blast radius as a graph, a trace's span
timeline and a session's graph growing live (walks at real sizes: test_explorer_scale.py).
Screenshots go to test-artifacts/ (or $LINEAGE_UI_ARTIFACTS)."""

import importlib.util
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from playwright.async_api import Page, expect

from lineage.core.derive import derive
from lineage.db.database import Database
from lineage.interop.span_processor import span_payload
from lineage.services import auth
from lineage.services.demo import CONTRACTOR_POLICY, load_incident
from lineage.store.postgres import PostgresStore
from tests.browser import ROOT, lineage_serve, offline_page
from tests.test_ui import sign_in

# Starts servers or browsers of its own: outside the fast tier.
pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "policy_pipeline.py"


def example_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("policy_pipeline", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Example:
    answer_id: str
    trace_id: str
    span_names: list[str]


@pytest.fixture
async def example(store: PostgresStore, client: httpx.AsyncClient) -> Example:
    """The demo incident, then the worked example in the same tenant (sharing its source URIs),
    traced, its spans sent to the service as LineageSpanProcessor would."""
    await load_incident(store)
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "policy-pipeline"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    result = await example_module().run_pipeline(store, provider.get_tracer("example"))
    provider.shutdown()
    spans = exporter.get_finished_spans()
    sent = await client.post("/v1/spans", json={"spans": [span_payload(s) for s in spans]})
    assert sent.status_code == 200, sent.text
    answer = result["recorded"].answer
    trace_id = answer.record.trace_id
    assert trace_id == format(spans[0].context.trace_id, "032x")
    return Example(answer.context_id, trace_id, [s.name for s in spans])


@pytest.fixture
async def served(database_url: str, tmp_path: Path) -> AsyncIterator[str]:
    with lineage_serve(database_url, tmp_path, auth="none") as url:
        yield url


def longest_from_a_source(nodes: list[dict[str, Any]]) -> dict[str, int]:
    """Each record's layer: the longest path to it from a record with no parent in the walk."""
    by_id = {node["context_id"]: node for node in nodes}
    layer: dict[str, int] = {}

    def visit(context_id: str) -> int:
        if context_id not in layer:
            parents = [p for p in by_id[context_id]["parent_ids"] if p in by_id]
            layer[context_id] = 1 + max(map(visit, parents)) if parents else 0
        return layer[context_id]

    for context_id in by_id:
        visit(context_id)
    return layer


# Every box's rectangle in the graph's own coordinates, and every edge point found inside a box
# that is neither of its ends.
EDGES_THROUGH_BOXES = """() => {
  const boxes = [...document.querySelectorAll("#graph .node")].map((node) => {
    const at = /translate\\(([-\\d.e]+) ([-\\d.e]+)\\)/.exec(node.getAttribute("transform"));
    const rect = node.querySelector("rect.box:not(.stack)");
    return { id: node.dataset.id, x: +at[1], y: +at[2], w: +rect.getAttribute("width"),
             h: +rect.getAttribute("height") };
  });
  const hits = [];
  for (const edge of document.querySelectorAll("#graph .edge")) {
    const length = edge.getTotalLength();
    for (let along = 0; along <= length; along += 3) {
      const p = edge.getPointAtLength(along);
      for (const b of boxes) {
        if (b.id === edge.dataset.child || b.id === edge.dataset.parent) continue;
        if (p.x > b.x + 1 && p.x < b.x + b.w - 1 && p.y > b.y + 1 && p.y < b.y + b.h - 1) {
          hits.push(`${edge.dataset.parent} -> ${edge.dataset.child} crosses ${b.id}`);
        }
      }
    }
  }
  return [...new Set(hits)];
}"""


async def centre_y(page: Page, context_id: str) -> float:
    box = await page.locator(f"#graph .node[data-id='{context_id}'] rect.box").bounding_box()
    assert box is not None, context_id
    return box["y"] + box["height"] / 2


async def test_the_example_walk_reads_by_layers_with_no_false_marks(
    example: Example, client: httpx.AsyncClient, served: str, chromium: str, artifacts: Path
) -> None:
    walk = (await client.get(f"/v1/contexts/{example.answer_id}/lineage")).json()
    layers = longest_from_a_source(walk["nodes"])
    assert max(layers.values()) == layers[example.answer_id]
    errors: list[str] = []
    async with offline_page(chromium, served, errors, height=1100) as page:
        await page.goto(f"{served}?walk={example.answer_id}")
        await expect(page.locator("#graph svg .node")).to_have_count(len(walk["nodes"]))
        await expect(page.locator("#suspicious")).to_contain_text("No suspicious hops")
        await expect(page.locator("#graph .node.marked")).to_have_count(0)
        await page.screenshot(path=artifacts / "example-walk.png", full_page=True)

        # One row per layer: the answer alone on top, every source on the bottom row.
        rows: dict[int, set[float]] = {}
        for context_id, layer in layers.items():
            rows.setdefault(layer, set()).add(round(await centre_y(page, context_id)))
        for layer, ys in rows.items():
            assert max(ys) - min(ys) <= 1, (layer, ys)
        heights = [min(rows[layer]) for layer in sorted(rows)]
        assert heights == sorted(heights, reverse=True), heights  # layer 0 lowest on the page
        sources = {n["kind"] for n in walk["nodes"] if layers[n["context_id"]] == 0}
        assert sources == {"document", "query"}
        assert await page.evaluate(EDGES_THROUGH_BOXES) == []

        # Zoom with the buttons and the wheel, pan by dragging the background.
        frame = page.locator("#graph")
        before = float(await frame.get_attribute("data-scale") or 0)
        await page.click("button[data-zoom='in']")
        await expect(frame).to_have_attribute("data-scale", f"{min(2.5, before * 1.25):.3f}")
        bounds = await frame.bounding_box()
        assert bounds is not None
        await page.mouse.move(bounds["x"] + 30, bounds["y"] + 30)
        await page.mouse.wheel(0, 400)
        zoomed = float(await frame.get_attribute("data-scale") or 0)
        assert zoomed < before * 1.25
        viewport = page.locator("#graph .viewport")
        moved_from = await viewport.get_attribute("transform")
        await page.mouse.down()
        await page.mouse.move(bounds["x"] + 130, bounds["y"] + 90, steps=5)
        await page.mouse.up()
        assert await viewport.get_attribute("transform") != moved_from
        await page.click("button[data-zoom='fit']")
        await expect(frame).to_have_attribute("data-scale", f"{before:.3f}")
    assert errors == [], errors


async def test_the_blast_radius_graph_counts_what_the_api_counts(
    store: PostgresStore, client: httpx.AsyncClient, served: str, chromium: str, artifacts: Path
) -> None:
    await load_incident(store)
    api = (await client.get("/v1/impact/page", params={"source_uri": CONTRACTOR_POLICY})).json()
    drawn_expected = {
        (layer["depth"], kind, count)
        for layer in api["layers"]
        for kind, count in layer["counts_by_kind"].items()
    }
    per_kind: dict[str, int] = {}
    for _, kind, count in drawn_expected:
        per_kind[kind] = per_kind.get(kind, 0) + count
    assert per_kind == api["summary"]["counts_by_kind"]
    errors: list[str] = []
    async with offline_page(chromium, served, errors) as page:
        await page.goto(f"{served}?source={CONTRACTOR_POLICY}")
        boxes = page.locator("#radius-graph .layer-box")
        await expect(boxes).to_have_count(len(drawn_expected))
        drawn = set()
        for box in await boxes.all():
            depth, kind, count = [
                await box.get_attribute(name) for name in ("data-depth", "data-kind", "data-count")
            ]
            drawn.add((int(depth or -1), kind, int(count or -1)))
        assert drawn == drawn_expected
        listing = page.locator("#listing")
        await expect(listing.locator("summary")).to_contain_text("Affected answers (1)")
        await expect(listing.locator("tbody tr")).to_have_count(1)
        await page.screenshot(path=artifacts / "blast-radius-graph.png", full_page=True)
        await page.locator("#radius-graph .layer-box[data-kind='chunk']").first.click()
        await expect(listing.locator("summary")).to_contain_text("chunk records (2)")
        await listing.locator("summary").click()  # folds the list away
        await expect(listing.locator("table")).to_be_hidden()
    assert errors == [], errors


async def test_the_trace_view_draws_the_example_spans_beside_its_records(
    example: Example, client: httpx.AsyncClient, served: str, chromium: str, artifacts: Path
) -> None:
    trace = (await client.get(f"/v1/traces/{example.trace_id}")).json()
    errors: list[str] = []
    async with offline_page(chromium, served, errors) as page:
        await page.goto(f"{served}?trace={example.trace_id}")
        spans = page.locator("#timeline .span-row")
        await expect(spans).to_have_count(len(example.span_names))
        names = {await row.get_attribute("data-name") for row in await spans.all()}
        assert names == {"answer the question", "embed the question", "retrieve", "summarise",
                         "answer"}  # fmt: skip
        records = page.locator("#timeline .record-row")
        await expect(records).to_have_count(len(trace["records"]))
        # Every record of the trace was made inside a span that noted producing it.
        await expect(page.locator("#timeline .record-row .made-in")).to_have_count(
            len(trace["records"])
        )
        # The root span's bar covers every record's moment.
        root = await page.locator("#timeline .span-row[data-name='answer the question'] rect"
                                  ).bounding_box()  # fmt: skip
        assert root is not None
        for dot in await page.locator("#timeline .record-dot").all():
            box = await dot.bounding_box()
            assert box is not None
            centre = box["x"] + box["width"] / 2
            assert root["x"] - 1 <= centre <= root["x"] + root["width"] + 1
        await page.screenshot(path=artifacts / "trace-timeline.png", full_page=True)
    assert errors == [], errors


async def test_the_live_view_grows_as_a_session_records(
    store: PostgresStore, database: Database, database_url: str, chromium: str,
    artifacts: Path, tmp_path: Path,
) -> None:  # fmt: skip
    key, _ = await auth.create_key(database, "default", "read")
    session = {"session_id": "sess_live"}
    errors: list[str] = []
    with lineage_serve(database_url, tmp_path) as url:
        async with offline_page(chromium, url, errors) as page:
            asked = await derive(store, [], "which notice?", "query", source_uri="chat://live",
                                 attributes=session)  # fmt: skip
            await page.goto(f"{url}?live=sess_live")
            await sign_in(page, key)
            count = page.locator("#live-status strong")
            await expect(count).to_have_attribute("data-count", "1")  # replayed from the start
            await expect(page.locator("#graph .node")).to_have_count(1)
            step = await derive(store, [asked], "look it up", "plan", attributes=session)
            await expect(count).to_have_attribute("data-count", "2")
            await derive(store, [], "unrelated", "document", source_uri="s3://elsewhere")
            reasoning = await derive(store, [asked, step], "so", "reasoning", attributes=session)
            await expect(count).to_have_attribute("data-count", "3")
            await expect(page.locator("#graph .node")).to_have_count(3)
            await expect(page.locator("#graph .edge")).to_have_count(3)
            await expect(page.locator(f"#graph .node[data-id='{reasoning.context_id}']")
                         ).to_be_visible()  # fmt: skip
            await expect(page.locator("#live-feed li")).to_have_count(3)
            await page.screenshot(path=artifacts / "live-session.png", full_page=True)
    assert errors == [], errors
